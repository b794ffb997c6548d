"""`lockgen facts`: the GPU facts' date, origin and sources; `lockgen facts check`: what an index (or a stack's
indexes and channels) publishes that they lack (exit 1 when it publishes anything they lack)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Optional

import typer

from lockgen.cli.ui import handles_errors, print_json, progress, say

facts_app = typer.Typer(
    help="The GPU facts lockgen decides with: their date and sources, and what they lack.",
    invoke_without_command=True,
    rich_markup_mode=None,
)


@facts_app.callback()
@handles_errors
def facts(
    context: typer.Context,
    as_json: bool = typer.Option(
        False, "--json", help="Print {valid_as_of, origin, archs, cuda_toolkits, ..., sources} as JSON."
    ),
) -> None:
    """Show the facts' date, origin ($LOCKGEN_FACTS or the packaged file), what they cover, and their sources."""
    if context.invoked_subcommand is not None:
        return
    from lockgen.api.facts import summary

    report = summary()
    if as_json:
        print_json(report)
        return
    say(f"facts valid as of {report['valid_as_of']} ({report['origin']})")
    say(
        f"  {report['archs']} archs; {report['cuda_toolkits']['count']} CUDA toolkits, newest "
        f"{report['cuda_toolkits']['newest']} (driver >= {report['cuda_toolkits']['newest_min_driver']})"
    )
    newest = ", ".join(f"{release} on {platform}" for platform, release in report["pypi_torch_newest"].items())
    say(
        f"  torch on PyPI up to {newest}; official arch lists up to {report['official_torch_newest']}; "
        f"{report['inferred_entries']} entries marked inferred"
    )
    say(f"  {len(report['sources'])} sources (lockgen facts --json lists them)")
    if report["unverifiable"]:
        say("not read from an authoritative source:")
        for line in report["unverifiable"]:
            say(f"  - {line}")
    say(
        "newer releases are judged from their own metadata when resolving; `lockgen facts check` lists what an "
        "index has that the facts lack"
    )


@facts_app.command("check")
@handles_errors
def facts_check(
    index: str = typer.Option("https://pypi.org/simple", "--index", help="A PEP 691 index (PyPI, a mirror)."),
    platform: list[str] = typer.Option([], "--platform", help="linux-64 or linux-aarch64 (repeatable; default both)."),
    python: str = typer.Option(
        "3.12", "--python", help="Whose wheels to read (their requirements can differ by Python)."
    ),
    exclude_newer: Optional[str] = typer.Option(
        None, "--exclude-newer", help="Ignore files uploaded on or after this date (YYYY-MM-DD)."
    ),
    stack: Optional[Path] = typer.Option(
        None,
        "--stack",
        help="Check what this stack reads instead: its PyPI index, platforms, Python and exclude-newer, and the "
        "pytorch/libtorch builds of its conda channels.",
    ),
    channel_alias: list[str] = typer.Option(
        [], "--channel-alias", help="With --stack: NAME=PATH_OR_URL, as for resolve."
    ),
    as_json: bool = typer.Option(
        False,
        "--json",
        help="Print {index, valid_as_of, newer_releases, variant_builds, unknown_cuda_toolkits, conda_builds} as JSON.",
    ),
) -> None:
    """List the torch releases, CUDA-variant builds (a PyTorch index's `+cu130`), conda builds and CUDA toolkits an
    index, or a stack's indexes and channels, offer that the facts lack; exit 1 if any."""
    from lockgen.api.facts import check, check_stack
    from lockgen.errors import UserError

    cutoff = None
    if exclude_newer is not None:
        try:
            cutoff = dt.date.fromisoformat(exclude_newer)
        except ValueError:
            raise UserError(f"--exclude-newer `{exclude_newer}` is not a date", "write it as YYYY-MM-DD") from None
    for name in platform:
        if name not in ("linux-64", "linux-aarch64"):
            raise UserError(f"--platform `{name}` is not one lockgen locks for", "use linux-64 or linux-aarch64")
    if stack is not None:
        report = check_stack(stack, channel_alias, progress)
    else:
        report = {
            **check(index, tuple(platform) or ("linux-64", "linux-aarch64"), python, cutoff, progress),
            "conda_builds": [],
        }
    if as_json:
        print_json(report)
    else:
        for release in report["newer_releases"]:
            say(f"{release['platform']}: {release['decision']}")
        for variant_build in report["variant_builds"]:
            say(f"{variant_build['platform']}: {variant_build['decision']}")
        for build in report["conda_builds"]:
            say(f"{build['platform']}: {build['build']}: {build['decision']}")
        for toolkit in report["unknown_cuda_toolkits"]:
            say(f"CUDA {toolkit['cuda']}: {toolkit['why']}")
    lacking = any(report[key] for key in ("newer_releases", "variant_builds", "unknown_cuda_toolkits", "conda_builds"))
    if not as_json and not lacking:
        progress(f"the facts (valid as of {report['valid_as_of']}) cover every torch release and build checked")
    if lacking:
        raise typer.Exit(1)
