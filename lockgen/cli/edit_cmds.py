"""`lockgen add` and `lockgen remove`: a package put in or taken out of stack.toml (its comments and layout
kept), the stack re-locked as `lockgen resolve` would, and what changed in each lock."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

import typer

from lockgen.cli.ui import fail, handles_errors, print_json, progress, say
from lockgen.model.names import shown

if TYPE_CHECKING:
    from lockgen.model.results import StackEdited

STACK_HELP = "The stack.toml to change (default: ./stack.toml)."
TARGET_HELP = "Re-lock only this target (repeatable); the others' locks are stale until `lockgen resolve`."


@handles_errors
def add(
    packages: list[str] = typer.Argument(
        ..., help='Packages as a spec: numpy, "numpy>=1.26", "transformers[torch]>=4.40".', metavar="PKG"
    ),
    pypi: bool = typer.Option(False, "--pypi", help="Add to [pypi-dependencies]."),
    conda: bool = typer.Option(False, "--conda", help="Add to [dependencies] (conda)."),
    stack: Path = typer.Option(Path("stack.toml"), "--stack", "-s", help=STACK_HELP),
    target: list[str] = typer.Option([], "--target", "-t", help=TARGET_HELP),
    channel_alias: list[str] = typer.Option(
        [], "--channel-alias", help="NAME=PATH_OR_URL: read channel NAME from a mirror or snapshot."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print what changed as JSON on stdout."),
) -> None:
    """Add packages to the stack (the table it uses, unless --pypi or --conda), re-lock, show the locks' changes."""
    from lockgen.api import edit as api
    from lockgen.model.requests import StackEditRequest

    if pypi and conda:
        fail("--pypi and --conda each name the table the packages go to", "pass one of them", 2)
    table: Literal["dependencies", "pypi-dependencies"] | None = (
        "pypi-dependencies" if pypi else "dependencies" if conda else None
    )
    _show(
        api.add(StackEditRequest(stack, tuple(packages), table, tuple(target), tuple(channel_alias)), progress), as_json
    )


@handles_errors
def remove(
    packages: list[str] = typer.Argument(..., help="Package names, as the stack writes them.", metavar="PKG"),
    stack: Path = typer.Option(Path("stack.toml"), "--stack", "-s", help=STACK_HELP),
    target: list[str] = typer.Option([], "--target", "-t", help=TARGET_HELP),
    channel_alias: list[str] = typer.Option(
        [], "--channel-alias", help="NAME=PATH_OR_URL: read channel NAME from a mirror or snapshot."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print what changed as JSON on stdout."),
) -> None:
    """Remove packages from the stack, re-lock, show the locks' changes."""
    from lockgen.api import edit as api
    from lockgen.model.requests import StackEditRequest

    _show(
        api.remove(StackEditRequest(stack, tuple(packages), None, tuple(target), tuple(channel_alias)), progress),
        as_json,
    )


def _show(edited: StackEdited, as_json: bool) -> None:
    if as_json:
        print_json(
            {
                "stack": str(edited.stack),
                "lines": list(edited.lines),
                "targets": [
                    {**t.result.to_dict(), "changes": None if t.changes is None else list(t.changes)}
                    for t in edited.targets
                ],
                "stale": list(edited.stale),
            }
        )
        return
    for line in edited.lines:
        progress(f"{shown(str(edited.stack))}: {shown(line, 200)}")
    for relocked in edited.targets:
        result = relocked.result
        progress(f"{result.state} {shown(str(result.path))}")
        if relocked.changes is None:
            say(f"{shown(result.target)}: a new lock, {sum(result.packages.values())} packages")
        elif not relocked.changes:
            say(f"{shown(result.target)}: no package changed")
        else:
            say(f"{shown(result.target)}:")
            for change in relocked.changes:
                say(f"  {shown(change, 200)}")
    if edited.stale:
        progress(
            f"not re-locked, stale now: {', '.join(shown(name) for name in edited.stale)} (lockgen resolve "
            f"{shown(str(edited.stack))})"
        )
