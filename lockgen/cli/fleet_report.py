"""What `lockgen fleet status` prints of its report, without typer: the note that signatures were not checked, the
rows (text or `--json`), the REFUSED and NUMERICS lines, and the failure it ends with. The typer command
(`fleet_cmd.status`) ends with that failure by `fail`, the fast path (`fast_path`) by `say_error` and exit 1: both
print through `print_status`, so both say the same bytes."""

from __future__ import annotations

from lockgen.api.fleet_status import difference_words, refused_note
from lockgen.cli.terminal import print_json_texts, progress, say
from lockgen.model.names import escaped, shown

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def print_status(report: dict[str, Any], keyed: bool, as_json: bool) -> tuple[str, str] | None:
    """Prints `report` (`api.fleet_status.fleet_status`'s; `keyed`: signatures were checked by `--key`) as text or
    JSON; returns the failure's message and hint when a node failed, a certificate was refused or a node's numerics
    differ, else None."""
    rows = report["rows"]
    if not keyed:
        progress(
            "note: signatures were not checked (pass --key KEY.pub): a certificate's content is only as "
            "trustworthy as the file"
        )
    if as_json:
        print_json_texts(
            {name: value for name, value in report.items() if name != "rows"}, "rows", rows.json_texts(depth=2)
        )
    else:
        _print_text(report)
    failing = rows.failing()
    failed, refused = failing.failed, failing.refused
    differ = [entry["node"] for entry in report["numerics"]["differ"]]
    if not (failed or refused or report["refused"] or differ):
        return None
    return (
        (
            f"{failed} failed, {refused} refused of {len(rows)} node certificates"
            if refused
            else f"{failed} of {len(rows)} node certificates failed"
        )
        + (f" ({', '.join(failing.first)})" if failing.first else "")
        + (
            f"; {len(report['refused'])} certificates refused "
            f"({', '.join(shown(entry['node']) for entry in report['refused'][:5])})"
            if report["refused"]
            else ""
        )
        + (
            f"; {len(differ)} of {report['numerics']['compared']} nodes compute different bits than the "
            f"others of their key ({', '.join(shown(node) for node in differ[:5])})"
            if differ
            else ""
        ),
        "each row names its failed checks (lockgen cert verify CERT shows them all); each REFUSED line says "
        "why that certificate does not count; each NUMERICS line names the digests that differ and the "
        "likely cause",
    )


def _print_text(report: dict[str, Any]) -> None:
    """The rows, one line each and aligned, then a REFUSED line per refused certificate and a NUMERICS line per node
    whose numerics differ."""
    rows = report["rows"]
    nodes = [escaped(row["node"]) for row in rows]  # escaped before the columns are measured: a row is one line
    width = max(map(len, nodes), default=4) + 2
    for node, row in zip(nodes, rows):
        state = (
            "REFUSED"
            if row["refused"]
            else "FAILED"
            if not row["passed"]
            else "REGRESSED"
            if row["regressions"]
            else "passed"
        )
        figures = ", ".join(f"{label} {entry['value']:.4g} {entry['unit']}" for label, entry in row["figures"].items())
        refused = [refused_note(row["refused"])] if row["refused"] else []
        why = "; ".join(refused + (row["failed"][:3] or row["regressions"][:3]))
        say(
            f"{node:<{width}}{escaped(row['covers']):<20} {state:<9} {row['age']:>6} ago  {figures}"
            + (f"  [{why}]" if why else "")
        )
    for entry in report["refused"]:
        say(f"REFUSED {shown(entry['node'])} {shown(entry['source'], 300)}: {entry['reason']}")
    for entry in report["numerics"]["differ"]:
        shared = entry["key"]
        say(
            f"NUMERICS {shown(entry['node'])}: {escaped(difference_words(entry))} "
            f"({shown(shared['device'])}, driver {shown(str(shared['driver']))}); likely cause: "
            f"{shown(entry['cause'], 400)}"
        )
