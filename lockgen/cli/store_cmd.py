"""`lockgen store verify [--repair]`: every file of lockgen's store read again against its proof (exit 1 when one is
damaged and not repaired)."""

from __future__ import annotations

import typer

from lockgen.cli.ui import handles_errors, print_json, progress, say
from lockgen.errors import UserError
from lockgen.model.names import shown

store_app = typer.Typer(
    help="lockgen's store of package files (its uv and rattler caches): read again, repaired.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@store_app.command("verify")
@handles_errors
def verify(
    repair: bool = typer.Option(
        False,
        "--repair",
        help="Move each damaged folder into $LOCKGEN_HOME/quarantine; the next materialize fetches it again against "
        "its locked hash.",
    ),
    as_json: bool = typer.Option(
        False, "--json", help="Print {files, damaged: [{store, folder, files, quarantined, environments}]} as JSON."
    ),
) -> None:
    """Re-hash every file of lockgen's store against the sha256 it was proven to have (as `nix store verify
    --check-contents`)."""
    from lockgen.api.store import verify_store

    scrub = verify_store(repair)
    if as_json:
        print_json(
            {
                "files": scrub.files,
                "damaged": [
                    {
                        "store": found.store,
                        "folder": str(found.folder),
                        "files": list(found.files),
                        "quarantined": str(found.quarantined) if found.quarantined else None,
                        "environments": [{"prefix": str(e.prefix), "repair": e.repair} for e in found.environments],
                    }
                    for found in scrub.damaged
                ],
            }
        )
    else:
        for found in scrub.damaged:
            where = f"moved to {shown(str(found.quarantined), 400)}" if found.quarantined else "left in place"
            say(
                f"damaged {found.store} folder {shown(str(found.folder), 400)}: {len(found.files)} files differ "
                f"(first {shown(found.files[0], 400)}); {where}"
            )
            for environment in found.environments:
                say(
                    f"  {shown(str(environment.prefix), 400)} links the damaged files; make it again: "
                    f"{shown(environment.repair, 800)}"
                )
        progress(
            f"read {scrub.files} store files again: {len(scrub.damaged)} folders damaged"
            + (", moved out: the next materialize fetches them again" if repair and scrub.damaged else "")
        )
    if scrub.damaged and not repair:
        raise UserError(
            f"{len(scrub.damaged)} folders of lockgen's store are damaged",
            "lockgen store verify --repair moves them out; the next materialize fetches them again against the "
            "lock's hashes",
        )
