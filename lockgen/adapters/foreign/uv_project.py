"""The workspace root's pyproject.toml, read for what uv takes from it at install time and uv.lock does not
record: the project's name (which member is the root; none for a workspace root that is no project) and
`[tool.uv] default-groups` (a list, or "all"; uv's `["dev"]` when unset); and the Python the workspace pins in
its `.python-version` (`uv python pin`), which uv takes before requires-python. The workspace's members and
conflicts are recorded in uv.lock itself (`[manifest] members`, `conflicts`) and read from there.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from lockgen.adapters import user_files
from lockgen.adapters.foreign.uv_lock import UvProject
from lockgen.errors import UserError


def project_beside(lock: Path, given: Path | None) -> Path | None:
    """The pyproject.toml to read for `lock`: `given` (a file, or the folder holding one), else the one
    beside the lock, else none."""
    if given is None:
        beside = lock.parent / "pyproject.toml"
        return beside if beside.is_file() else None
    path = given / "pyproject.toml" if given.is_dir() else given
    if not path.is_file():
        raise UserError(
            f"--project `{given}` is no pyproject.toml (nor a folder holding one)",
            "pass the pyproject.toml of the workspace root that wrote the uv.lock",
        )
    return path


_PIN_BYTES = 4096
_PINNED = re.compile(r"(?:cpython[-@]?)?(3\.\d{1,2}(?:\.\d{1,2})?)")


def pinned_python(folders: list[Path]) -> tuple[str, Path] | None:
    """(the CPython X.Y or X.Y.Z, the file) a `.python-version` in the first of `folders` that holds one pins, as
    `uv python pin` reads it (its first line that is no comment); None where none does."""
    for folder in folders:
        path = folder / ".python-version"
        if not path.is_file():  # a regular file only (a FIFO there would block the read)
            continue
        try:
            with path.open("rb") as handle:
                head = handle.read(_PIN_BYTES)  # a pin is one short line: what lies past this is not read
            lines = [line.strip() for line in head.decode("utf-8").splitlines()]
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"cannot read `{path}`: {exc}", "fix it, or pass --python X.Y") from None
        request = next((line for line in lines if line and not line.startswith("#")), "")
        found = _PINNED.fullmatch(request)
        if found is None:
            raise UserError(
                f"`{path}` pins `{request[:40]}`, not a CPython 3.X version lockgen can import for", "pass --python X.Y"
            )
        return found.group(1), path
    return None


def read_uv_project(path: Path) -> UvProject:
    """The settings uv would read from `path`."""
    try:
        data = tomllib.loads(user_files.read_bytes(path, user_files.STACK_LIMIT, "pyproject.toml").decode("utf-8"))
    except RecursionError:  # nested past the TOML reader
        raise UserError(
            f"`{path}` is no pyproject.toml: it nests deeper than a reader goes",
            "pass the workspace root's pyproject.toml with --project",
        ) from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UserError(
            f"cannot read `{path}` as a pyproject.toml: {str(exc).splitlines()[0] if str(exc) else exc}",
            "pass the workspace root's pyproject.toml with --project, or move the lock away from it",
        ) from None
    project, tool = data.get("project"), (data.get("tool") or {}).get("uv") or {}
    name = project.get("name") if isinstance(project, dict) else None
    if name is not None and not isinstance(name, str):
        raise UserError(f"`{path}`: [project] name is not a string", "fix the pyproject.toml uv reads")
    defaults = tool.get("default-groups", ["dev"]) if isinstance(tool, dict) else ["dev"]
    if defaults == "all":
        return UvProject(str(path), name, (), all_default_groups=True)
    if not isinstance(defaults, list) or not all(isinstance(group, str) for group in defaults):
        raise UserError(
            f'`{path}`: [tool.uv] default-groups is neither a list of group names nor "all"',
            "fix the pyproject.toml uv reads (uv refuses it too)",
        )
    return UvProject(str(path), name, tuple(defaults))
