"""A step below export: the Python an image's venv runs on, proven to be in the image before it is written.

A venv has no interpreter of its own: its `bin/python` is a link to a Python outside it (`pyvenv.cfg`'s
`home` names that folder). An image holding only the venv cannot start its Python (`podman run IMAGE python`
ends with "executable file not found" or a dangling link), so export refuses it, with the ways out, instead of
writing it:
- a pure-PyPI lock's venv is pointed at the base image's `pythonX.Y` (`/usr/local/bin` of the `python:X.Y`
  images first, else Debian's `/usr/bin`), which must be a file of the base (links followed, whiteouts
  applied: `core.image.layer_lookup`);
- an existing venv (`--from-prefix`) keeps its links, so the Python they lead to must be a file of the base at
  that very path (and the one `home` names, when it is another folder);
- a vendor's image adopted as it is (`--from-image`) must hold the Python its venv links to;
- a team's wheels added to a base that is a Python environment run on the base venv's Python, which the base
  image's own environment manifest records as its `bin/python` link: it must be a file of the base.
A conda python is a file of the environment, and a program the kernel starts by its own rules
(`core.image.program_start`): a dynamically linked ELF program with the dynamic loader its `PT_INTERP` names
(`/lib64/ld-linux-x86-64.so.2` of glibc on x86_64, `/lib/ld-linux-aarch64.so.1` on aarch64), a script with the
interpreter its `#!` line names. `prove_python_starts` reads the environment's `bin/python` (links followed)
and refuses an image that has no file at that path, neither in the environment nor in the base's layers, or
a program of another machine than the platform's, or one the kernel refuses; a script's interpreter that is
itself in the environment is judged the same way, as many times as the kernel re-reads one (5). An
environment with no `bin/python` (CUDA libraries only) has nothing to start and is not refused."""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from lockgen.adapters.store import installers
from lockgen.adapters.image.program_files import program_file
from lockgen.api.steps import base_steps
from lockgen.core.image.layer_lookup import file_at
from lockgen.core.image.program_start import MACHINES, program_start
from lockgen.model.names import shown
from lockgen.errors import UserError
from lockgen.model.image import LayerEntry

_WAYS_OUT = (
    "pass --base with an image that has {wanted} (docker://docker.io/library/python:{version}-slim, or a "
    "Debian or Ubuntu image with its python{version} package), or give the stack a conda python "
    '(python = "{version}.*" in [dependencies]) and export it on a --base with glibc'
)


def venv_python(
    base: base_steps.Base | None, platform: str, version: str | None, progress: Callable[[str], None]
) -> str:
    """The base image's `pythonX.Y` that a pure-PyPI lock's venv is pointed at; refused when the base has none,
    or there is no base."""
    version = ".".join((version or "3").split(".")[:2])
    name = f"python{version}"
    wanted = [f"/usr/local/bin/{name}", f"/usr/bin/{name}"]
    found = base_steps.base_file(base, platform, wanted, progress) if base is not None else None
    if found is None:
        where = "the base image has no file" if base is not None else "no --base image brings one"
        raise UserError(
            f"the lock's environment is a venv (PyPI packages only) that runs on {name}, and {where} at "
            f"{' or '.join(wanted)}: the image could not start its Python",
            _WAYS_OUT.format(wanted=" or ".join(wanted), version=version),
        )
    progress(f"the venv runs on the base image's {found}")
    return found


def prove_existing_venv(
    base: base_steps.Base | None,
    platform: str,
    environment: Path,
    image_prefix: str,
    source: str | None,
    progress: Callable[[str], None],
) -> None:
    """Refuses an existing environment (`--from-prefix`) whose `bin/python` links to a Python outside it that
    the base image does not hold at that path (or that has no base)."""
    _prove_links(_in_base(base, platform, progress), environment, image_prefix, source, progress)


def prove_in_layers(
    layers: Sequence[Sequence[LayerEntry]],
    environment: Path,
    image_prefix: str,
    platform: str,
    progress: Callable[[str], None],
) -> None:
    """Refuses a vendor image (`--from-image`, its layers' members as read when it was unpacked) whose
    environment's `bin/python` links to a Python outside it that the image does not hold, or is a program
    whose loader or interpreter the image does not hold."""
    by_path = [{entry.path: entry for entry in layer} for layer in layers]

    def holds(path: str) -> bool:
        return file_at(path, by_path.__getitem__, len(by_path)) is not None

    _prove_links(
        holds,
        environment,
        image_prefix,
        None,
        progress,
        "adopt an image that holds the Python its venv links to, or export the lock on a base image that has "
        "Python (lockgen export LOCK --base IMAGE)",
    )
    _prove_starts(
        holds,
        environment,
        image_prefix,
        platform,
        "the image has no file there",
        progress,
        "adopt an image that holds {interpreter}, or export the lock on a base image that has it (lockgen export "
        "LOCK --base IMAGE)",
    )


def prove_python_starts(
    base: base_steps.Base | None,
    platform: str,
    environment: Path,
    image_prefix: str,
    glibc: str,
    progress: Callable[[str], None],
    index: bool = False,
) -> None:
    """Refuses an image of the environment at `environment` (at `image_prefix` in the image, on `base` or on
    none) whose `bin/python` the kernel could not start there: its dynamic loader (or `#!` interpreter) is a
    file neither of the environment nor of the base. `glibc`: the lock's `lockgen.glibc`, for the hint;
    `index`: the image is one platform's of an image index, which takes no base."""
    where = (
        "the base image has no file there"
        if base is not None
        else "an image index takes no --base to bring one"
        if index
        else "no --base image brings one"
    )
    wanted = f"glibc >= {glibc} (the lock's lockgen.glibc)" if glibc else "glibc"
    _prove_starts(
        _in_base(base, platform, progress),
        environment,
        image_prefix,
        platform,
        where,
        progress,
        (f"export --platform {platform} alone and " if index else "")
        + f"pass --base an image with {wanted} that has {{interpreter}}, e.g. "
        "docker://docker.io/library/debian:bookworm-slim",
    )


def _prove_starts(
    holds: Callable[[str], bool],
    environment: Path,
    prefix: str,
    platform: str,
    where: str,
    progress: Callable[[str], None],
    hint: str,
) -> None:
    """The kernel's way from the environment's `bin/python` to a program it maps, each step proven in the image:
    a file of the environment is read and judged again, one outside it must be a file `holds` has."""
    top = prefix.rstrip("/")
    path, data = program_file(environment, prefix, f"{top}/bin/python")
    if data is None:
        if path == f"{top}/bin/python":
            progress("the environment has no bin/python: no Python to start")
        elif path.startswith(f"{top}/") and not holds(path):  # a link out of it is a venv's: the steps above
            raise UserError(
                f"the environment's bin/python leads to {shown(path)}, and the image has no file there: it could "
                "not start its Python",
                "the environment is broken: materialize the lock again, or export it from the lock",
            )
        return
    what = f"the environment's Python ({shown(path)})"
    for _ in range(6):  # the program and the scripts' interpreters the kernel re-reads (at most 5)
        start = program_start(data)
        if start.kind == "refused" or (start.machine and MACHINES.get(platform, start.machine) != start.machine):
            why = start.why or f"is an ELF program for machine {start.machine}, not {platform}'s ({MACHINES[platform]})"
            raise UserError(
                f"{what} {why}: the image could not start its Python",
                f"the package that ships it is broken for this platform: lock a python built for {platform}",
            )
        if start.kind == "static":
            progress(f"{what} is a static program: it starts alone")
            return
        needs = (
            f"is an ELF program that needs the dynamic loader {shown(start.interpreter)}"
            if start.kind == "loader"
            else f"is a script run by {shown(start.interpreter)} (its #! line)"
        )
        if not start.interpreter.startswith("/"):
            raise UserError(
                f"{what} {needs}, a path relative to the working folder: the image could not start its Python",
                "the package that ships it is broken: lock a python that names an absolute path",
            )
        found, data = program_file(environment, prefix, start.interpreter)
        if data is None or start.kind == "loader":  # a loader is mapped, not read for a #! line
            if data is not None or holds(found):
                progress(f"{what} {needs}, a file of the image: it starts there")
                return
            raise UserError(
                f"{what} {needs}, and {where}: the image could not start its Python",
                hint.format(interpreter=shown(start.interpreter)),
            )
        what = f"{what}'s interpreter {shown(found)}"
    raise UserError(
        f"{what} is a script run by a script more than 5 times: the kernel would not start it",
        "lock a python whose bin/python is a program",
    )


def _prove_links(
    holds: Callable[[str], bool],
    environment: Path,
    image_prefix: str,
    source: str | None,
    progress: Callable[[str], None],
    *hint: str,
) -> None:
    outside = installers.outside_interpreter(environment, image_prefix, source)
    if outside is None:
        return
    interpreter, home = outside
    wanted = [interpreter] + (
        [posixpath.join(home, posixpath.basename(interpreter))]
        if home and home != posixpath.dirname(interpreter)
        else []
    )
    for path in wanted:
        _prove(
            holds,
            path,
            f"the environment's bin/python links to {interpreter} outside it"
            + (f" (pyvenv.cfg home = {home})" if home else ""),
            progress,
            *hint,
        )


def prove_held_python(
    base: base_steps.Base,
    platform: str,
    entries: Mapping[str, Mapping[str, Any]],
    prefix: str,
    progress: Callable[[str], None],
) -> None:
    """Refuses a team export on a base Python environment whose recorded `bin/python` links (the base image's
    environment manifest, `entries` by path) lead outside it to a Python the base image does not hold."""
    current = "bin/python"
    for _ in range(17):  # bounded, as a kernel gives up on a loop of links
        entry = entries.get(current) or {}
        if entry.get("type") != "link":
            return
        target = str(entry.get("target", ""))
        absolute = posixpath.normpath(posixpath.join(prefix, posixpath.dirname(current), target))
        if absolute != prefix and not absolute.startswith(prefix + "/"):
            _prove(
                _in_base(base, platform, progress),
                absolute,
                f"the base environment's bin/python links to {absolute} outside it",
                progress,
            )
            return
        current = posixpath.relpath(absolute, prefix)


def _prove(
    holds: Callable[[str], bool],
    interpreter: str,
    why: str,
    progress: Callable[[str], None],
    hint: str = (
        "pass --base with an image that has {interpreter}, or export the lock instead "
        "(lockgen export LOCK --base IMAGE points its venv at the base's own Python)"
    ),
) -> None:
    """Refuses unless `holds(interpreter)`: the image's layers below the environment have that file."""
    if holds(interpreter):
        progress(f"{interpreter} is a file of the image: the environment's Python runs there")
        return
    raise UserError(
        f"{why}, and the image has no file there: it could not start its Python", hint.format(interpreter=interpreter)
    )


def _in_base(base: base_steps.Base | None, platform: str, progress: Callable[[str], None]) -> Callable[[str], bool]:
    return lambda path: base is not None and base_steps.base_file(base, platform, [path], progress) is not None
