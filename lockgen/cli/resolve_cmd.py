"""`lockgen resolve`: stack.toml to one lock per target; `--check` reports stale locks."""

from __future__ import annotations

from pathlib import Path

import typer

from lockgen.cli.terminal import print_resolved
from lockgen.cli.ui import handles_errors, print_json, progress, say


@handles_errors
def resolve(
    stack: Path = typer.Argument(
        Path("stack.toml"), help="The stack.toml to resolve, or its folder (default: ./stack.toml).", show_default=False
    ),
    target: list[str] = typer.Option([], "--target", "-t", help="Only this target (repeatable)."),
    update: list[str] = typer.Option(
        [], "--update", "-u", help="Re-solve PKG, holding every other package at its locked version."
    ),
    check: bool = typer.Option(
        False, "--check", help="Solve nothing; exit 1 and print typed reasons if a lock is missing or stale."
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Solve but write no lock (a base image's own lock is still kept, an input)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print results as JSON on stdout."),
    channel_alias: list[str] = typer.Option(
        [], "--channel-alias", help="NAME=PATH_OR_URL: read channel NAME from a mirror or snapshot."
    ),
    insecure: bool = typer.Option(
        False, "--insecure", help='A base image (`extends = "docker://…"`) in a plain-HTTP or self-signed registry.'
    ),
) -> None:
    """Resolve a stack into one conda lockfile per GPU target (locks/<target>.conda-lock.yml)."""
    from lockgen.api import resolve as api

    stack = stack / "stack.toml" if stack.is_dir() else stack
    if check:
        reasons = api.stale(stack, target, channel_alias, progress, insecure)
        if as_json:
            print_json([r.__dict__ for r in reasons])
        else:
            for reason in reasons:
                say(reason.line())
        if reasons:
            raise typer.Exit(1)
        progress("all locks are fresh")
        return
    results = api.resolve(stack, target, update, channel_alias, dry_run=dry_run, progress=progress, insecure=insecure)
    print_resolved(results, dry_run, as_json)
