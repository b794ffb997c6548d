"""Processes inside an environment: its conda `etc/conda/activate.d/*.sh` scripts sourced by bash to learn
what they export, and this process replaced (exec) by a command or a shell in it.

The scripts run through one constant bash program (no text built from input: the prefix and the interpreter
that prints the result are its arguments), their own output sent to stderr. `exec_command` replaces lockgen
with the command, so the command has lockgen's process id: its exit status is lockgen's and every signal
sent to lockgen (SIGINT, SIGTERM, SIGHUP) is the command's, with nothing between to forward them. Python
ignores SIGPIPE and SIGXFSZ, and an exec'd program would inherit that: both go back to their defaults first.
A shell gets lockgen's rc files (`lockgen/data/shell/`: bash's `--rcfile`, zsh's `ZDOTDIR`) or fish's `-C`,
which run the user's own start-up files, then the activation again, then mark the prompt."""

from __future__ import annotations

import os
import signal
import sys

from lockgen.errors import CommandError

TYPE_CHECKING = False  # typing, pathlib, json: not imported on the kept `run`'s path, which ends in `exec_command`
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path
    from typing import NoReturn

    from lockgen.core.env.activation import Kind, Shell

ACTIVATE_D = "etc/conda/activate.d"
_SOURCE = (
    'for f in "$1"/etc/conda/activate.d/*.sh; do if [ -f "$f" ]; then . "$f" >&2; fi; done; exec "$2" -I -S -c '
    '"import json, os, sys; sys.stdout.write(json.dumps(dict(os.environ)))"'
)
SHELL_DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "data", "shell")
_FISH_INIT = (
    "eval $LOCKGEN_ACTIVATE; set -e LOCKGEN_ACTIVATE; "
    "functions -q fish_prompt; and functions -c fish_prompt _lockgen_prompt; "
    "function fish_prompt; printf '(lockgen:%s) ' $LOCKGEN_ENV_NAME; "
    "functions -q _lockgen_prompt; and _lockgen_prompt; end"
)


def activate_scripts(prefix: Path) -> list[Path]:
    """The environment's activate.d shell scripts, in the order conda sources them (by name)."""
    folder = prefix / ACTIVATE_D
    return sorted(p for p in folder.glob("*.sh") if p.is_file()) if folder.is_dir() else []


def sourced_environment(prefix: Path, environment: Mapping[str, str]) -> tuple[dict[str, str], str]:
    """The variables bash has after sourcing the environment's activate.d scripts with `environment` set, and
    what the scripts printed (for stderr: stdout is the command's, or `activate`'s exports)."""
    import json

    from lockgen.adapters.tool_runner import find_tool, run_tool  # subprocess: only for an environment with scripts

    bash = find_tool("bash", "install bash: a conda environment's activate.d scripts are bash")
    done = run_tool(
        [bash, "--noprofile", "--norc", "-c", _SOURCE, "lockgen-activate", str(prefix), sys.executable],
        f"sourcing the activate.d scripts of {prefix}",
        f"fix or remove the failing script under {prefix / ACTIVATE_D}",
        timeout_s=120,
        env=environment,
    )
    return dict(json.loads(done.stdout)), done.stderr


def exec_command(argv: list[str], environment: Mapping[str, str]) -> NoReturn:
    """Replaces this process with `argv` (found on `environment`'s PATH); a command that cannot be started
    is a `CommandError` (127 not found, 126 not runnable, as a shell says them)."""
    _ready_to_exec()
    try:
        os.execvpe(argv[0], argv, dict(environment))
    except FileNotFoundError:
        raise CommandError(
            f"`{argv[0]}` is not a program on the environment's PATH",
            "name a program the environment has (ls PREFIX/bin), or give its path",
            127,
        ) from None
    except OSError as exc:
        raise CommandError(
            f"`{argv[0]}` cannot be run: {exc.strerror or exc}",
            "pass a program this machine can run (a file with its x bit, for this machine's architecture)",
            126,
        ) from None
    except ValueError:  # an empty name, or a NUL in an argument: no program has one
        from lockgen.model.names import shown

        raise CommandError(
            f"`{shown(argv[0], 60)}` cannot name a program (empty, or with a NUL byte in the command)",
            "name a program after --",
            127,
        ) from None


def exec_shell(shell: str, kind: Shell | None, environment: Mapping[str, str], marker: str) -> NoReturn:
    """Replaces this process with an interactive `shell` in the environment, its prompt marked."""
    env = dict(environment)
    argv = [shell]
    if kind == "bash":
        argv += ["--rcfile", os.path.join(SHELL_DATA, "bashrc")]
    elif kind == "zsh":
        if "ZDOTDIR" in env:
            env["LOCKGEN_USER_ZDOTDIR"] = env["ZDOTDIR"]
        env["ZDOTDIR"] = os.path.join(SHELL_DATA, "zsh")
    elif kind == "fish":
        argv += ["-C", _FISH_INIT]
    else:  # a POSIX sh reads its prompt from the environment
        env["PS1"] = f"({marker}) $ "
    exec_command(argv, env)


def _ready_to_exec() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    for name in ("SIGPIPE", "SIGXFSZ"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, set())


def environment_kind(prefix: Path) -> Kind | None:
    """`conda` for a conda environment (its `conda-meta/`), `venv` for a venv (its `pyvenv.cfg`), else None."""
    if (prefix / "conda-meta").is_dir():
        return "conda"
    return "venv" if (prefix / "pyvenv.cfg").is_file() else None


def calling_environment() -> dict[str, str]:
    """The variables lockgen was started with, which an activation starts from."""
    return dict(os.environ)


def login_shell() -> str | None:
    """The user's shell (`$SHELL`), if set."""
    return os.environ.get("SHELL") or None
