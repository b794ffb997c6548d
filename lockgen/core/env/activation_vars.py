"""The variables of an activation, pure and with nothing imported: what `lockgen run`, `shell` and `activate`
set for an environment of a kind at a prefix (`activated`, the rules of `core.env.activation`, which re-exports it),
and the name a prompt shows. Apart from `activation` so the kept `run` (`kept_runs`) builds the very same
variables without importing re, shlex, pathlib or dataclasses."""

from __future__ import annotations

TYPE_CHECKING = False  # typing: for annotations only (this module is on the kept `run`'s path)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import PurePosixPath

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"  # where PATH is not set at all
PROMPT_CHARACTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


def prompt_name(name: str) -> str:
    """A name for a prompt marker: letters, digits, `.`, `_`, `-` only (anything else becomes `_`), so no
    shell ever expands it."""
    return "".join(c if c in PROMPT_CHARACTERS else "_" for c in name)[:64] or "env"


def bin_folder(folder: str) -> str:
    """The `bin` folder of `folder`, as `PurePosixPath(folder) / "bin"` names it: empty and `.` parts dropped,
    a root of exactly two slashes kept (POSIX leaves its meaning to the system), `..` kept."""
    root = "//" if folder.startswith("//") and not folder.startswith("///") else "/" if folder.startswith("/") else ""
    return root + "/".join([*(part for part in folder.split("/") if part not in ("", ".")), "bin"])


def activated(kind: str, prefix: str | PurePosixPath, name: str, inherited: Mapping[str, str]) -> dict[str, str]:
    """The environment a command runs with in the environment of `kind` (`conda`, `venv`) at `prefix` (its
    scripts not yet sourced), from the calling one."""
    where = str(prefix)
    own_bin = bin_folder(where)
    leaving = {bin_folder(inherited[v]) for v in ("CONDA_PREFIX", "VIRTUAL_ENV") if inherited.get(v)}
    entries = inherited["PATH"].split(":") if "PATH" in inherited else DEFAULT_PATH.split(":")
    path = ":".join([own_bin] + [e for e in entries if e != own_bin and e not in leaving])
    result = {k: v for k, v in inherited.items() if k != "PYTHONHOME"}
    result.update(PATH=path, LOCKGEN_ENV_NAME=prompt_name(name))
    if kind == "conda":
        result.pop("VIRTUAL_ENV", None)
        result.pop("VIRTUAL_ENV_PROMPT", None)
        result.update(CONDA_PREFIX=where, CONDA_DEFAULT_ENV=where, CONDA_SHLVL="1")
    else:
        result.pop("CONDA_PREFIX", None)
        result.pop("CONDA_DEFAULT_ENV", None)
        result.update(VIRTUAL_ENV=where, VIRTUAL_ENV_PROMPT=prompt_name(name))
    return result
