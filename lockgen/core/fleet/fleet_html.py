"""`lockgen fleet status --html`: one static page a person reads at a glance. A matrix of nodes by lock (or
image), each cell coloured by its latest certificate (green passed, amber passed with regressions, red
failed) with its age; then one bar chart per headline figure across nodes, as inline SVG. No script, no
external asset, every text escaped: the page can be mailed or served as it is.

A chart of a large fleet draws the `CHART_BARS` lowest values (the nodes to look at: the worst throughput, the
slowest step) and says how many nodes it leaves out, and their range; 10,000 bars a chart made
the page of 10,000 nodes 9 MB."""

from __future__ import annotations

from html import escape

from lockgen.core.fleet.fleet_status import HEADLINES, StatusRow, age_text

COLOURS = {"passed": "#2e9e44", "regressed": "#e0a100", "failed": "#d1342f"}
CHART_WIDTH, BAR_HEIGHT, CHAR_WIDTH = 640, 22, 7.5  # px; labels are sized by their longest text
CHART_BARS = 40  # bars a chart draws at most
LOWER_IS_BETTER = ("training",)  # of HEADLINES' groups: a step's time, where the highest values are the ones to look at


def _state(row: StatusRow) -> str:
    return "failed" if not row.passed else "regressed" if row.regressions else "passed"


def _cell(row: StatusRow | None) -> str:
    if row is None:
        return '<td class="none">no certificate</td>'
    state = _state(row)
    why = "; ".join(row.failed[:3] or row.regressions[:3])
    detail = f"<br><small>{escape(why)}</small>" if why else ""
    return (
        f'<td style="background:{COLOURS[state]}" '
        f'title="{escape(row.source)}">{escape(state.upper())}<br><small>{escape(age_text(row.age_s))} ago, '
        f"{row.certificates} cert.</small>{detail}</td>"
    )


def _chart(label: str, worse_when_higher: bool, rows: list[StatusRow]) -> str:
    values = [(row.node, row.covers, *row.figures[label]) for row in rows if label in row.figures]
    if not values:
        return ""
    top = max(value for _, _, value, _ in values) or 1.0
    unit = values[0][3]
    more = ""
    if len(values) > CHART_BARS:
        ordered = sorted(values, key=lambda item: -item[2] if worse_when_higher else item[2])
        values, rest = ordered[:CHART_BARS], ordered[CHART_BARS:]
        more = (
            f"<p>the {CHART_BARS} {'highest' if worse_when_higher else 'lowest'} of {len(ordered)} nodes; "
            f"{len(rest)} more from {rest[0][2]:.4g} to {rest[-1][2]:.4g} {escape(unit)}</p>"
        )
    label_width = max(160.0, CHAR_WIDTH * max(len(f"{node} ({covered})") for node, covered, _, _ in values))
    bars = []
    for index, (node, covered, value, _) in enumerate(values):
        y = index * (BAR_HEIGHT + 6)
        width = max(1.0, (CHART_WIDTH - 120) * value / top)
        bars.append(
            f'<text x="0" y="{y + 16}" font-size="13">{escape(node)} ({escape(covered)})</text>'
            f'<rect x="{label_width:.0f}" y="{y}" width="{width:.1f}" height="{BAR_HEIGHT}" fill="#3b6ea8"/>'
            f'<text x="{label_width + 6 + width:.1f}" y="{y + 16}" font-size="13">{value:.4g} {escape(unit)}</text>'
        )
    height = len(values) * (BAR_HEIGHT + 6)
    return (
        f'<h3>{escape(label)} ({escape(unit)})</h3><svg width="{label_width + CHART_WIDTH:.0f}" height="{height}" '
        f'role="img" aria-label="{escape(label)}">{"".join(bars)}</svg>{more}'
    )


def status_page(rows: list[StatusRow], generated: str) -> str:
    nodes = sorted({row.node for row in rows})
    columns = sorted({row.covers for row in rows})
    by_cell = {(row.node, row.covers): row for row in rows}
    header = "".join(f"<th>{escape(column)}</th>" for column in columns)
    body = "".join(
        f"<tr><th>{escape(node)}</th>{''.join(_cell(by_cell.get((node, c))) for c in columns)}</tr>" for node in nodes
    )
    counts = {state: sum(1 for row in rows if _state(row) == state) for state in COLOURS}
    summary = ", ".join(f"{count} {state}" for state, count in counts.items())
    charts = "".join(_chart(label, group in LOWER_IS_BETTER, rows) for group, _, label in HEADLINES)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>lockgen fleet status</title>
<style>body{{font-family:sans-serif;margin:24px}} table{{border-collapse:collapse}}
td,th{{border:1px solid #999;padding:8px 12px;text-align:center}} td{{color:#fff;font-weight:bold}}
td.none{{background:#eee;color:#555;font-weight:normal}} small{{font-weight:normal}}</style></head>
<body><h1>lockgen fleet status</h1>
<p>{escape(str(len(rows)))} node and lock pairs: {escape(summary)}. Generated {escape(generated)}.</p>
<table><tr><th>node</th>{header}</tr>{body}</table>
<h2>Headline figures across nodes</h2>{charts or "<p>no figures recorded</p>"}
</body></html>
"""
