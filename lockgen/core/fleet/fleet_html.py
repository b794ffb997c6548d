"""`lockgen fleet status --html`: one static page a person reads at a glance. A matrix of nodes by lock (or
image), each cell coloured by its latest certificate (green passed, amber passed with regressions, red
failed, purple a node with a refused certificate) with its age; the certificates refused, each with its node, file
and reason, and the nodes whose numerics differ, each with its digests and likely cause, as the text says them
(and, without `--key`, that signatures were not checked); then one bar chart per headline figure across nodes, as
inline SVG. No script, no external asset, every text escaped: the page can be mailed or served as it is.

A chart of a large fleet draws the `CHART_BARS` lowest values (the nodes to look at: the worst throughput, the
slowest step) and says how many nodes it leaves out, and their range; 10,000 bars a chart made
the page of 10,000 nodes 9 MB. A bar is scaled as its value's fraction of the largest, which no finite value
overflows (two nodes at 1e308 are two full bars, not a width of `inf`)."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from lockgen.core.fleet.fleet_status import HEADLINES, StatusRow, age_text, refused_note, strict_text
from lockgen.model.names import escaped
from lockgen.core.certificate.numerics_votes import difference_words

COLOURS = {"passed": "#2e9e44", "regressed": "#e0a100", "failed": "#d1342f", "refused": "#7b3294"}
CHART_WIDTH, BAR_HEIGHT, CHAR_WIDTH = 640, 22, 7.5  # px; labels are sized by their longest text
CHART_BARS = 40  # bars a chart draws at most
LOWER_IS_BETTER = ("training",)  # of HEADLINES' groups: a step's time, where the highest values are the ones to look at


def _shown(text: object) -> str:
    """Text not lockgen's own as the page shows it: as the text output escapes it (`escaped`: a direction override,
    a C1 control, a newline as its Python escape; a name's bytes that are not UTF-8 as `strict_text` writes them),
    then as HTML (`html.escape`), so nothing in it reorders the page or is read as markup."""
    return escape(escaped(strict_text(str(text))))


def _state(row: StatusRow) -> str:
    if row.refused:
        return "refused"
    return "failed" if not row.passed else "regressed" if row.regressions else "passed"


def _cell(row: StatusRow | None) -> str:
    if row is None:
        return '<td class="none">no certificate</td>'
    state = _state(row)
    why = "; ".join(([refused_note(row.refused)] if row.refused else []) + list(row.failed[:3] or row.regressions[:3]))
    detail = f"<br><small>{_shown(why)}</small>" if why else ""
    return (
        f'<td style="background:{COLOURS[state]}" '
        f'title="{_shown(row.source)}">{_shown(state.upper())}<br><small>{_shown(age_text(row.age_s))} ago, '
        f"{row.certificates} cert.</small>{detail}</td>"
    )


def _chart(label: str, worse_when_higher: bool, rows: list[StatusRow]) -> str:
    values = [(row.node, row.covers, *row.figures[label]) for row in rows if label in row.figures]
    if not values:
        return ""
    top = max(abs(value) for _, _, value, _ in values) or 1.0
    unit = values[0][3]
    more = ""
    if len(values) > CHART_BARS:
        ordered = sorted(values, key=lambda item: -item[2] if worse_when_higher else item[2])
        values, rest = ordered[:CHART_BARS], ordered[CHART_BARS:]
        more = (
            f"<p>the {CHART_BARS} {'highest' if worse_when_higher else 'lowest'} of {len(ordered)} nodes; "
            f"{len(rest)} more from {rest[0][2]:.4g} to {rest[-1][2]:.4g} {_shown(unit)}</p>"
        )
    label_width = max(160.0, CHAR_WIDTH * max(len(f"{node} ({covered})") for node, covered, _, _ in values))
    bars = []
    for index, (node, covered, value, _) in enumerate(values):
        y = index * (BAR_HEIGHT + 6)
        width = max(1.0, (CHART_WIDTH - 120) * (value / top))  # the fraction first: at most 1, never inf
        bars.append(
            f'<text x="0" y="{y + 16}" font-size="13">{_shown(node)} ({_shown(covered)})</text>'
            f'<rect x="{label_width:.0f}" y="{y}" width="{width:.1f}" height="{BAR_HEIGHT}" fill="#3b6ea8"/>'
            f'<text x="{label_width + 6 + width:.1f}" y="{y + 16}" font-size="13">{value:.4g} {_shown(unit)}</text>'
        )
    height = len(values) * (BAR_HEIGHT + 6)
    return (
        f'<h3>{_shown(label)} ({_shown(unit)})</h3><svg width="{label_width + CHART_WIDTH:.0f}" height="{height}" '
        f'role="img" aria-label="{_shown(label)}">{"".join(bars)}</svg>{more}'
    )


def _refusals(refused: Sequence[dict[str, str]]) -> str:
    """The certificates refused, each with its node, file and reason (the text's REFUSED lines)."""
    return _table(
        "Refused certificates",
        "These do not count, each for the reason given, and no node of theirs is shown as passed.",
        ("node", "file", "reason"),
        [(entry["node"], entry["source"], entry["reason"]) for entry in refused],
    )


def _differences(differ: Sequence[dict[str, Any]]) -> str:
    """The nodes whose numerics differ, with the digests, their key and the likely cause (the text's NUMERICS lines)."""
    return _table(
        "Nodes whose numerics differ",
        "Each computes different bits than the others of its key.",
        ("node", "what differs", "key", "likely cause"),
        [
            (
                entry["node"],
                difference_words(entry),
                f"{entry['key']['device']}, driver {entry['key']['driver']}",
                entry["cause"],
            )
            for entry in differ
        ],
    )


def _table(title: str, intro: str, headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A section of the page: its title, a line of lockgen's own, and a table whose every cell is escaped
    (`_shown`); nothing where there are no rows."""
    if not rows:
        return ""
    head = "".join(f"<th>{header}</th>" for header in headers)
    body = "".join("<tr>" + "".join(f"<td>{_shown(cell)}</td>" for cell in row) + "</tr>" for row in rows)
    return f'<h2>{title}</h2><p>{intro}</p><table class="list"><tr>{head}</tr>{body}</table>'


def status_page(
    rows: list[StatusRow],
    generated: str,
    refused: Sequence[dict[str, str]],
    differ: Sequence[dict[str, Any]],
    signatures_checked: bool,
) -> str:
    """The page of a status, saying all the text says: its `rows`, the certificates `refused` ({node, source,
    reason}), the nodes whose numerics `differ` (`NumericsDifference.as_json`'s) and, unless `signatures_checked`
    (`--key`), that they were not."""
    nodes = sorted({row.node for row in rows})
    columns = sorted({row.covers for row in rows})
    by_cell = {(row.node, row.covers): row for row in rows}
    header = "".join(f"<th>{_shown(column)}</th>" for column in columns)
    body = "".join(
        f"<tr><th>{_shown(node)}</th>{''.join(_cell(by_cell.get((node, c))) for c in columns)}</tr>" for node in nodes
    )
    counts = {state: sum(1 for row in rows if _state(row) == state) for state in COLOURS}
    summary = ", ".join(f"{count} {state}" for state, count in counts.items())
    summary += f"; {len(refused)} certificates refused; {len(differ)} nodes whose numerics differ"
    note = (
        ""
        if signatures_checked
        else "<p><strong>Signatures were not checked</strong> (pass --key KEY.pub): a certificate's content is only "
        "as trustworthy as the file.</p>"
    )
    charts = "".join(_chart(label, group in LOWER_IS_BETTER, rows) for group, _, label in HEADLINES)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>lockgen fleet status</title>
<style>body{{font-family:sans-serif;margin:24px}} table{{border-collapse:collapse}}
td,th{{border:1px solid #999;padding:8px 12px;text-align:center}} td{{color:#fff;font-weight:bold}}
td.none{{background:#eee;color:#555;font-weight:normal}} small{{font-weight:normal}}
table.list td{{color:#000;font-weight:normal;text-align:left}}</style></head>
<body><h1>lockgen fleet status</h1>
<p>{_shown(str(len(rows)))} node and lock pairs: {_shown(summary)}. Generated {_shown(generated)}.</p>{note}
<table><tr><th>node</th>{header}</tr>{body}</table>
{_refusals(refused)}{_differences(differ)}
<h2>Headline figures across nodes</h2>{charts or "<p>no figures recorded</p>"}
</body></html>
"""
