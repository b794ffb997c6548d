"""`lockgen pack` and `lockgen unpack`: a lock's artifacts as one archive, and its environment made from that archive
on a machine with no network."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from lockgen.cli.ui import handles_errors, print_environment, print_json, progress, say


@handles_errors
def pack(
    lock: Path = typer.Argument(..., help="A lock written by lockgen resolve (or import)."),
    out: Path = typer.Option(..., "--out", "-o", help="The archive to write (F.tar; written whole or not at all)."),
    platform: Optional[str] = typer.Option(
        None, "--platform", "-p", help="Which platform of the lock (default: this host's)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print {archive, sha256, size, platform, artifacts} as JSON."),
) -> None:
    """Put every artifact the lock pins for a platform, hash-checked, and the lock itself into one tar archive."""
    from lockgen.api.pack import pack as run
    from lockgen.cli.ui import Meter

    with Meter() as meter:
        packed = run(lock, out, platform, progress, meter)
    if as_json:
        print_json(
            {
                "archive": str(packed.path),
                "sha256": packed.sha256,
                "size": packed.size,
                "platform": packed.platform,
                "artifacts": packed.artifacts,
            }
        )
    else:
        say(packed.path)


@handles_errors
def unpack(
    archive: Path = typer.Argument(..., help="An archive written by lockgen pack."),
    prefix: Path = typer.Option(
        ..., "--prefix", help="Where to make the environment (nothing is left there on failure)."
    ),
    platform: Optional[str] = typer.Option(
        None, "--platform", "-p", help="The archive's platform (default: the one it holds)."
    ),
    lock: Optional[Path] = typer.Option(None, "--lock", help="The lock the archive must carry, byte for byte."),
    as_json: bool = typer.Option(False, "--json", help="Print {prefix, environment_digest, archive} as JSON."),
) -> None:
    """Make the archive's lock an environment with no network: every member checked against the lock first."""
    from lockgen.api.pack import unpack as run
    from lockgen.cli.ui import Meter

    with Meter() as meter:
        path, digest = run(archive, prefix, platform, lock, progress, meter)
    print_environment(path, digest, as_json, {"archive": str(archive)})
