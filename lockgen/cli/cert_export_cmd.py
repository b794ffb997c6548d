"""`lockgen cert export`: a certificate as Prometheus metrics, Node Feature Discovery features, a Node Problem
Detector verdict or a JUnit report; and the parsing of `--emit` and `--valid-for`, which `lockgen verify`
shares with it."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Optional

import typer

from lockgen.cli.ui import emit, fail, handles_errors, progress, say
from lockgen.model.export_formats import EXPORT_FORMATS, FILE_FORMATS, NFD_VALID_FOR, VALID_FOR_UNITS

_DURATION = re.compile(r"([1-9][0-9]{0,5})([mhdw])")
_EMIT_EXAMPLE = "e.g. --emit prom=/var/lib/prometheus/node-exporter/lockgen.prom,junit=report.xml"
SIGNER_KEYS_HELP = (
    "A signer's public key (KEY.pub): the certificate must be signed by one of the keys given and its signature "
    "verify, as `cert verify` checks it. Repeatable (one per signer). Without it, only an unsigned certificate is "
    "accepted."
)


def parse_valid_for(text: str) -> dt.timedelta:
    """`--valid-for`: a count and a unit (m, h, d, w), e.g. `12h` or `7d`; anything else is a usage error."""
    matched = _DURATION.fullmatch(text.strip())
    if matched is None:
        fail(f"--valid-for {text!r} is not a duration", "pass a count and a unit: 30m, 12h, 7d or 2w", 2)
    return int(matched.group(1)) * VALID_FOR_UNITS[matched.group(2)]


def parse_emit(values: list[str], certificate_out: Optional[Path]) -> tuple[tuple[str, Path], ...]:
    """`--emit FORMAT=FILE`, repeatable or comma-separated, as (format, file) pairs; a usage error unless
    each names a file format and a file of its own."""
    pairs: list[tuple[str, Path]] = []
    for item in (part.strip() for value in values for part in value.split(",")):
        fmt, equals, file = item.partition("=")
        if not equals or not file.strip():
            fail(f"--emit {item!r} is not FORMAT=FILE", _EMIT_EXAMPLE, 2)
        if fmt == "npd":
            fail(
                "npd is a line and an exit status for Node Problem Detector, not a file",
                "make NPD's custom plugin run `lockgen cert export CERT --format npd`",
                2,
            )
        if fmt not in FILE_FORMATS:
            fail(f"--emit names the unknown format `{fmt}`", f"file formats: {', '.join(FILE_FORMATS)}", 2)
        path = Path(file.strip())
        if any(path == other for _, other in pairs) or path == certificate_out:
            fail(f"--emit writes `{path}` twice", "give each rendering (and the certificate) its own file", 2)
        pairs.append((fmt, path))
    return tuple(pairs)


@handles_errors
def export(
    cert: Path = typer.Argument(..., help="A certificate file."),
    fmt: str = typer.Option(
        ...,
        "--format",
        "-f",
        help="prom (node_exporter textfile metrics), nfd (Node Feature "
        "Discovery features.d file), npd (Node Problem Detector plugin: one line, exit 1 when "
        "the certificate failed), junit (JUnit XML).",
    ),
    out: Optional[Path] = typer.Option(
        None, "--out", "-o", help="Write here, atomically, instead of stdout (not for npd)."
    ),
    key: list[Path] = typer.Option([], "--key", help=SIGNER_KEYS_HELP),
    valid_for: Optional[str] = typer.Option(
        None, "--valid-for", help="nfd: how long after the run the features stay valid (30m, 12h, 7d, 2w; default 7d)."
    ),
    expect_numerics: Optional[Path] = typer.Option(
        None,
        "--expect-numerics",
        help="A reference numerics fingerprint per key (a good node's certificate, its numerics object, or a list): a "
        "certificate whose fingerprint differs fails in the rendering, naming the digests and the likely cause.",
    ),
) -> None:
    """Render a certificate for the tools fleets read: metrics, node features, a problem detector, CI reports."""
    from lockgen.api.certs import export_certificate

    if fmt not in EXPORT_FORMATS:
        fail(f"unknown format `{fmt}`", f"pass --format {', '.join(EXPORT_FORMATS[:-1])} or {EXPORT_FORMATS[-1]}", 2)
    if fmt == "npd" and out is not None:
        fail("npd is a line and an exit status for Node Problem Detector, not a file", "leave out --out", 2)
    if valid_for is not None and fmt != "nfd":
        fail("--valid-for is the lifetime of node features", "pass it with --format nfd", 2)
    exported = export_certificate(
        cert, fmt, key, out, NFD_VALID_FOR if valid_for is None else parse_valid_for(valid_for), expect_numerics
    )
    for note in exported.notes:
        progress(f"note: {note}")
    if out is None:
        emit(exported.text)
    else:
        say(out)
    if fmt == "npd" and not exported.passed:
        raise typer.Exit(1)
