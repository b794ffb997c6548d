"""A pure-PyPI lock of this interpreter's own CPU torch, offline: pip downloads the torch it runs (and its
dependencies) as wheels, a PEP 503 index lists them by hash, and `lockgen resolve` locks a CPU target on it.
An environment materialized from it holds its torch inside its prefix, whatever interpreter runs the tests
(a venv's `--system-site-packages` would see its base interpreter's, which need not have torch)."""

from __future__ import annotations

import hashlib
import importlib.metadata
import subprocess
import sys
from pathlib import Path

from tests.conftest import run_cli

PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"


def _torch_index(folder: Path) -> str:
    """pip downloads this host's torch and its dependencies as wheels; a simple index lists them by hash."""
    wheels = folder / "wheels"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--only-binary=:all:",
            "-d",
            str(wheels),
            f"torch=={importlib.metadata.version('torch')}",
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    for wheel in sorted(wheels.glob("*.whl")):
        project = wheel.name.split("-")[0].lower().replace("_", "-")
        page = folder / "simple" / project
        page.mkdir(parents=True, exist_ok=True)
        sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
        with (page / "index.html").open("a") as stream:
            stream.write(f'<a href="{wheel.as_uri()}#sha256={sha}">{wheel.name}</a>\n')
    return (folder / "simple").as_uri()


def torch_lock(folder: Path) -> Path:
    """`folder/locks/cpu.conda-lock.yml`: this host's torch for a CPU target, resolved from `folder`'s index."""
    index = _torch_index(folder)  # this host's CPU torch, for the CPU target's torch and everything else
    (folder / "stack.toml").write_text(f"""[stack]
name = "torch-cpu"
python = "{PYTHON}"
platforms = ["linux-64"]

[pypi-dependencies]
torch = "=={importlib.metadata.version("torch").split("+")[0]}"

[pypi-options]
index-url = "{index}"
torch-indexes = {{ cpu = "{index}" }}

[targets.cpu]
arch = "cpu"
""")
    resolved = run_cli("resolve", str(folder / "stack.toml"))
    assert resolved.returncode == 0, resolved.stderr
    return folder / "locks" / "cpu.conda-lock.yml"
