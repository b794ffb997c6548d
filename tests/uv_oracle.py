"""uv as the oracle of the uv.lock tests: what `uv export --frozen` selects for a project and a choice on one
Linux platform (its markers evaluated for that platform and CPython), what lockgen's import takes for the
same, and small uv projects written and locked by the real `uv lock`."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from packaging.markers import Marker

from lockgen.model.requests import ImportOptions
from lockgen.adapters.pypi.uv_resolver import uv_binary
from lockgen.api.import_lock import import_lock
from lockgen.model.names import MACHINE_OF_PLATFORM


def normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def uv_export(project: Path, flags: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            uv_binary(),
            "export",
            "--frozen",
            "--format",
            "requirements-txt",
            "--no-hashes",
            "--no-emit-project",
            "--no-header",
            *flags,
        ],
        cwd=project,
        capture_output=True,
        text=True,
    )


def uv_selects(project: Path, flags: list[str], platform: str, python: str) -> set[tuple[str, str]]:
    """(name, version) of what `uv export --frozen` lists for the choice, markers evaluated for the target
    (`python` X.Y, meaning X.Y.0, or X.Y.Z)."""
    done = uv_export(project, flags)
    assert done.returncode == 0, done.stderr
    full = python if python.count(".") == 2 else f"{python}.0"
    environment = {
        "sys_platform": "linux",
        "platform_system": "Linux",
        "os_name": "posix",
        "platform_machine": MACHINE_OF_PLATFORM[platform],
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "python_version": ".".join(full.split(".")[:2]),
        "python_full_version": full,
        "implementation_version": full,
    }
    selected = set()
    for line in done.stdout.splitlines():
        if not line or line.startswith((" ", "#", "-e")):
            continue
        requirement, _, marker = line.partition(" ; ")
        name, _, version = requirement.partition("==")
        if not marker or Marker(marker).evaluate(environment):
            selected.add((normal(name), version.strip()))
    return selected


def lockgen_takes(
    source: Path, choices: ImportOptions, platform: str, out: Path, project: Path | None = None
) -> set[tuple[str, str]]:
    """(name, version) lockgen imports for the platform, with what it lists as not convertible."""
    _, lock = import_lock(source, "t", out, replace(choices, project=project))
    taken = {(normal(p.name), p.version) for p in lock.packages_for(platform)}
    for reason in (lock.meta("skipped") or "").split("; "):
        found = re.match(rf"{platform}: `([^`]+)` (\d\S*) ", reason)
        if found:
            taken.add((normal(found[1]), found[2]))
    return taken


def write_project(folder: Path, files: dict[str, str]) -> Path:
    """A uv project of `files` (relative path -> text; each pyproject's package gets an empty module), locked
    by the real `uv lock` with this interpreter."""
    for relative, text in files.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        name = re.search(r'^name = "([^"]+)"', text, re.M)
        if relative.endswith("pyproject.toml") and name:
            module = path.parent / "src" / name[1].replace("-", "_") / "__init__.py"
            module.parent.mkdir(parents=True, exist_ok=True)
            module.touch()
    done = subprocess.run([uv_binary(), "lock", "--python", sys.executable], cwd=folder, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return folder
