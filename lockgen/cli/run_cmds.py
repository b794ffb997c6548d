"""`lockgen run`, `shell`, `activate` and `detect`: work inside a lock's environment, materialized on first use.
`run`'s command is everything after `--` (or, without it, from the first word after LOCK|STACK), taken as it is
(never parsed as lockgen's options)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer
from typer.core import TyperCommand

from lockgen.cli.ui import emit, fail, handles_errors, print_json, progress, say

COMMAND = "lockgen.command"
SOURCE_HELP = "A lock, or a stack (stack.toml or its folder; default ./stack.toml) whose target's lock to use."
TARGET_HELP = "With a STACK: the target whose lock to use (default: the one this node matches, as lockgen detect says)."
PLATFORM_HELP = "Which platform of the lock (default: this host's)."
LOCKED_HELP = "With a STACK: refuse a lock its stack has changed since (error and hint) instead of re-locking it."
FROZEN_HELP = "With a STACK: use its lock as it is, without checking it against the stack."
PREFIX_HELP = (
    "Where the environment is (default: the store's, $LOCKGEN_HOME/envs/…); alone, without LOCK or STACK: an "
    "existing conda environment or venv, used as it is."
)


class AfterDoubleDash(TyperCommand):
    """A command whose arguments after `--` are a command line of its own, kept verbatim in `ctx.meta`; without
    `--`, the command line starts at the first word that is neither an option, an option's value nor the
    LOCK|STACK (`lockgen run LOCK python -V`, `lockgen run python -V` with ./stack.toml), as `uv run` takes it."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:  # ctx: typer's own click Context
        dash = args.index("--") if "--" in args else len(args)
        start = self._command_start(args[:dash])
        if start is not None:
            ctx.meta[COMMAND], args = args[start:], args[:start]
        elif dash < len(args):
            ctx.meta[COMMAND], args = args[dash + 1 :], args[:dash]
        return super().parse_args(ctx, args)

    def _command_start(self, args: list[str]) -> int | None:
        """Where the command begins in a line without `--`: the second plain word, or the first where it cannot
        be the LOCK|STACK (no such file or folder, and no `.yml`, `.yaml` or `.toml` path)."""
        valued = {
            flag
            for param in self.params
            if getattr(param, "opts", None) and not getattr(param, "is_flag", True)
            for flag in param.opts
        }
        index, source_seen = 0, False
        while index < len(args):
            word = args[index]
            if word in valued:
                index += 2
                continue
            if word.startswith("-"):
                index += 1
                continue
            if source_seen or not (Path(word).exists() or word.endswith((".yml", ".yaml", ".toml"))):
                return index
            source_seen = True
            index += 1
        return None

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return [*super().collect_usage_pieces(ctx), "[--] CMD..."]


def _wanted(
    source: Optional[Path],
    target: Optional[str],
    platform: Optional[str],
    prefix: Optional[Path],
    locked: bool,
    frozen: bool,
) -> Any:
    """The environment asked for; a stack's stale lock is re-locked by resolve (its lines on stderr) unless
    `--locked` (refused) or `--frozen` (used as it is)."""
    from lockgen.api.run import Wanted

    if locked and frozen:
        fail(
            "--locked and --frozen cannot be given together",
            "--locked refuses a stale lock, --frozen uses it as it is: pass one",
            2,
        )

    def relock(stack: Path, name: str) -> None:
        from lockgen.api.resolve import resolve

        for result in resolve(stack, [name], progress=progress):
            progress(f"{result.state} {result.path}")

    return Wanted(source, target, platform, prefix, "locked" if locked else "frozen" if frozen else "relock", relock)


def _within(replace: Any, *args: Any) -> Any:
    """Calls the use case `replace` with a progress meter (the environment may be materialized first)."""
    from lockgen.cli.ui import Meter

    with Meter() as meter:
        return replace(*args, progress, meter)


@handles_errors
def run(
    ctx: typer.Context,
    source: Optional[Path] = typer.Argument(None, help=SOURCE_HELP, metavar="LOCK|STACK"),
    target: Optional[str] = typer.Option(None, "--target", "-t", help=TARGET_HELP),
    platform: Optional[str] = typer.Option(None, "--platform", "-p", help=PLATFORM_HELP),
    prefix: Optional[Path] = typer.Option(None, "--prefix", help=PREFIX_HELP),
    locked: bool = typer.Option(False, "--locked", help=LOCKED_HELP),
    frozen: bool = typer.Option(False, "--frozen", help=FROZEN_HELP),
) -> None:
    """Run `-- CMD…` in the environment (materialized first if it is not yet; a STACK's lock re-locked first if
    the stack changed since); its exit status and signals are the command's (lockgen becomes it)."""
    command: list[str] = ctx.meta.get(COMMAND) or []
    if not command:
        fail(
            "name the command to run",
            "lockgen run LOCK python -c 'print(1)' (or after --, where it starts with a dash)",
            2,
        )
    from lockgen.api.run import run as replace_with

    _within(replace_with, _wanted(source, target, platform, prefix, locked, frozen), command)


@handles_errors
def shell(
    source: Optional[Path] = typer.Argument(None, help=SOURCE_HELP, metavar="LOCK|STACK"),
    target: Optional[str] = typer.Option(None, "--target", "-t", help=TARGET_HELP),
    platform: Optional[str] = typer.Option(None, "--platform", "-p", help=PLATFORM_HELP),
    prefix: Optional[Path] = typer.Option(None, "--prefix", help=PREFIX_HELP),
    locked: bool = typer.Option(False, "--locked", help=LOCKED_HELP),
    frozen: bool = typer.Option(False, "--frozen", help=FROZEN_HELP),
) -> None:
    """Open $SHELL (else bash) in the environment, its prompt marked (lockgen:NAME); its exit status is lockgen's."""
    from lockgen.api.run import shell as replace_with

    _within(replace_with, _wanted(source, target, platform, prefix, locked, frozen))


@handles_errors
def activate(
    source: Optional[Path] = typer.Argument(None, help=SOURCE_HELP, metavar="LOCK|STACK"),
    target: Optional[str] = typer.Option(None, "--target", "-t", help=TARGET_HELP),
    platform: Optional[str] = typer.Option(None, "--platform", "-p", help=PLATFORM_HELP),
    prefix: Optional[Path] = typer.Option(None, "--prefix", help=PREFIX_HELP),
    shell_name: Optional[str] = typer.Option(None, "--shell", help="bash, zsh or fish (default: $SHELL's, else bash)."),
    locked: bool = typer.Option(False, "--locked", help=LOCKED_HELP),
    frozen: bool = typer.Option(False, "--frozen", help=FROZEN_HELP),
) -> None:
    """Print the environment's activation for eval: eval "$(lockgen activate LOCK)" (fish: lockgen activate LOCK
    --shell fish | source); nothing else goes to stdout."""
    from lockgen.api.run import exports

    emit(_within(exports, _wanted(source, target, platform, prefix, locked, frozen), shell_name))


@handles_errors
def detect(
    stack: Optional[Path] = typer.Argument(
        None, help="A stack.toml, or its folder (default: ./stack.toml).", metavar="STACK"
    ),
    node: Optional[Path] = typer.Option(
        None,
        "--node",
        help="State the node's facts in a JSON file instead of probing this one (for tests and dry runs; "
        "$LOCKGEN_NODE_FACTS does it for every command).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print {target, reasons, node, targets} as JSON."),
) -> None:
    """Print the stack's target this node matches (GPU arch, driver, platform, glibc), saying why; exit 1 when
    none does, with what differs for each."""
    from lockgen.api.run import detect as run_detect

    found = run_detect(stack, node)
    if as_json:
        print_json(found.as_dict())
        return
    for each in found.fits:
        verdict = (
            "chosen"
            if each.target == found.chosen.target
            else ("matches, a closer one is chosen" if each.fits else "differs")
        )
        progress(f"{each.target}: {verdict}: {'; '.join(each.reasons)}")
    say(found.chosen.target)
