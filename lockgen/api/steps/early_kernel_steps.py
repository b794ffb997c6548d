"""The verification kernel started with lockgen (`lockgen verify`, its command line read by `cli/fast_path.py`
before typer and the models are imported): its interpreter and torch's import overlap lockgen's own start, the
GPU probe and the reading of the inputs. `verify` takes it when its plan is this one (`kernel.run_single`); one it
does not take is stopped when the command ends.

Only where nothing is proven about the environment meanwhile: not with `--lock` (the conformance walk would race
the kernel's own `__pycache__` writes) nor `--image` (its interpreter is in the image, unpacked later)."""

from __future__ import annotations

import sys
from pathlib import Path

from lockgen.adapters.node import kernel
from lockgen.model.names import normalize_arch
from lockgen.model.requests import Prefix


def start_kernel(
    arch: str, python: str | None, prefix: str | None, quick: bool, compiled: bool, allow_ptx: bool
) -> None:
    """Starts the single kernel for `lockgen verify --arch ARCH [--python PY | --prefix DIR]` and these flags,
    with the interpreter `verify` will choose (`api.verify._interpreter`)."""
    interpreter = python or (str(Prefix(Path(prefix)).path / "bin" / "python") if prefix else sys.executable)
    kernel.start_early(interpreter, normalize_arch(arch), quick, compiled, allow_ptx)


def stop_kernel() -> None:
    """Stops the kernel `start_kernel` started when no run took it: its whole process group, its folder."""
    kernel.abandon_early()
