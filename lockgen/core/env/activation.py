"""An environment's activation, pure: the variables `lockgen run`, `shell` and `activate` set for an
environment of a kind at a prefix, what its conda `activate.d` scripts changed, and those changes written
for a shell to `eval`.

The variables, as conda's and venv's own activation set them:
- both: `PATH` with `PREFIX/bin` first (and the bin folder of a conda environment or venv active in the
  calling environment taken out, as `conda activate` does when it switches), `PYTHONHOME` unset (it would
  point the environment's interpreter at another's library), `LOCKGEN_ENV_NAME` (for a prompt);
- a conda environment: `CONDA_PREFIX`, `CONDA_DEFAULT_ENV`, `CONDA_SHLVL=1`; an active venv's `VIRTUAL_ENV` unset;
- a venv (a pure-PyPI environment): `VIRTUAL_ENV`, `VIRTUAL_ENV_PROMPT`; a conda environment's `CONDA_PREFIX`
  and `CONDA_DEFAULT_ENV` unset.
A conda environment's `etc/conda/activate.d/*.sh` scripts (cuda-nvcc's set `CUDA_HOME`, `NVCC_PREPEND_FLAGS`)
are sourced by bash once, with those variables set, and what they exported becomes part of the activation
(`sourced`): so `run` (which execs the command with the variables, no shell between), `shell` and
`activate --shell fish` all see the same variables. What a script defines that is not an exported variable
(a shell function, an alias) is not carried."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Literal

from lockgen.core.env.activation_vars import DEFAULT_PATH, activated, prompt_name

__all__ = [
    "DEFAULT_PATH",
    "activated",
    "prompt_name",
]  # the variables' rules: `activation_vars`, imported by the kept `run` alone

Kind = Literal["conda", "venv"]
Shell = Literal["bash", "zsh", "fish"]
SHELLS: tuple[Shell, ...] = ("bash", "zsh", "fish")
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SHELL_OWN = ("_", "SHLVL", "PWD", "OLDPWD")  # set by the bash that sources the scripts, not by them


@dataclass(frozen=True)
class Changes:
    """What an activation changes in the calling environment: variables set (sorted) and unset."""

    set: tuple[tuple[str, str], ...]
    unset: tuple[str, ...]


def sourced(before: Mapping[str, str], after: Mapping[str, str]) -> dict[str, str]:
    """The environment after the activate.d scripts: what bash had once they ran (`after`), with the
    variables bash itself keeps (`SHLVL`, `PWD`, `_`) as they were `before`."""
    result = {k: v for k, v in after.items() if k not in SHELL_OWN}
    result.update({k: before[k] for k in SHELL_OWN if k in before})
    return result


def changes(calling: Mapping[str, str], environment: Mapping[str, str]) -> Changes:
    """What turns `calling` into `environment`; names no shell can set (not identifiers) are left out."""
    names = [k for k in environment if IDENTIFIER.fullmatch(k) and calling.get(k) != environment[k]]
    gone = [k for k in calling if IDENTIFIER.fullmatch(k) and k not in environment]
    return Changes(tuple(sorted((k, environment[k]) for k in names)), tuple(sorted(gone)))


def exports(change: Changes, shell: Shell) -> str:
    """`change` as lines for `eval` in `shell`: `export N=V` / `unset N` quoted by `shlex.quote` (bash, zsh),
    `set -gx N V` / `set -e N` in fish's own single quotes (fish splits a `*PATH` variable on `:` itself)."""
    if shell == "fish":
        lines = [f"set -e {name}" for name in change.unset]
        lines += [f"set -gx {name} {fish_quote(value)}" for name, value in change.set]
    else:
        lines = [f"unset {name}" for name in change.unset]
        lines += [f"export {name}={shlex.quote(value)}" for name, value in change.set]
    return "".join(line + "\n" for line in lines)


def fish_quote(value: str) -> str:
    """A fish single-quoted word: inside, only `\\'` and `\\\\` are escapes."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def shell_kind(path: str) -> Shell | None:
    """Which shell lockgen knows a program to be, by its name (`/usr/bin/zsh` -> `zsh`), or None."""
    name = PurePosixPath(path).name
    return next((s for s in SHELLS if name == s), None)
