"""`lockgen explain [STACK] [--target T]`: why a target (by default this node's) gets the torch it gets, candidate by
candidate."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from lockgen.cli.ui import handles_errors, print_json, say


@handles_errors
def explain(
    stack: Path = typer.Argument(
        Path("stack.toml"), help="The stack.toml, or its folder (default: ./stack.toml).", show_default=False
    ),
    target: Optional[str] = typer.Option(
        None,
        "--target",
        "-t",
        help="The target to explain (default: the one this node matches, as lockgen detect says).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print as JSON."),
    channel_alias: list[str] = typer.Option(
        [], "--channel-alias", help="NAME=PATH_OR_URL: read channel NAME from a mirror or snapshot."
    ),
) -> None:
    """Every torch candidate (release x variant x source x platform) with its verdict and deciding rule, newest
    first."""
    from lockgen.api.explain import explain as run

    report = run(stack / "stack.toml" if stack.is_dir() else stack, target, channel_alias)
    if as_json:
        print_json(report)
        return
    say(f"target {report['target']}: {report['arch']}, driver {report['driver'] or 'none'}")
    if report["cuda_window"]:
        say(f"CUDA window {report['cuda_window']}: {report['window_reason']}")
    for platform, best in report["newest_admitted"].items():
        say(f"newest admitted on {platform}: {best or 'none'}")
    for c in report["candidates"]:
        verdict = "admitted" if c["admitted"] else "refused "
        say(
            f"{verdict} {c['package']} {c['release']} {c['variant']} {c['source']} {c['platform']}  "
            f"[{c['rule']}] {c['reason']}"
        )
