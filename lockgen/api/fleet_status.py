"""Use case `lockgen fleet status`: every node x lock (or image) from certificate folders and images'
attestations, with its latest result, age, headline figures and regressions against the node's previous
certificate; as text, `--json`, or one static HTML page (`--html`), written atomically."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lockgen.adapters.atomic_files import write_atomic
from lockgen.api.steps.attestation_steps import attached_certificates
from lockgen.api.steps.certificate_steps import list_certificates
from lockgen.core.fleet_html import status_page
from lockgen.core.fleet_status import status_rows
from lockgen.core.stack_layout import CERT_SUFFIX
from lockgen.errors import UserError
from lockgen.model.certificate import CertificateBody


def _node_of(path: Path) -> str:
    """`n1.cert.json` (lockgen fleet slurm's name for node n1's certificate) and `n1.health.cert.json` are n1."""
    return path.name.removesuffix(CERT_SUFFIX).removesuffix(".health")


def fleet_status(
    sources: Sequence[str], public_key: Path | None, insecure: bool, noise: float, html: Path | None, now: dt.datetime, progress: Callable[[str], None] = lambda _: None
) -> dict[str, Any]:
    """{"rows": [...], "refused": [...]} for the certificates under each folder and attached to each image."""
    found: list[tuple[str, str, CertificateBody]] = []
    refused: list[dict[str, str]] = []
    for source in sources:
        if source.startswith("docker://"):
            _, attached = attached_certificates(source, public_key, insecure, progress)
            for attestation in attached:
                if attestation.body is None:
                    refused.append({"source": attestation.location, "reason": attestation.reason or ""})
                else:
                    found.append((source.removeprefix("docker://"), attestation.location, attestation.body))
            continue
        folder = Path(source)
        if not folder.exists():
            raise UserError(f"`{source}` is neither a folder of certificates nor docker://REF", "pass folders holding *.cert.json (lockgen fleet slurm's --certs) or image references")
        found.extend((_node_of(path), str(path), body) for path, body in list_certificates(folder))
    if not found and not refused:
        raise UserError(f"no certificates in {', '.join(sources)}", "lockgen verify writes them (--out), lockgen fleet slurm's job into its --certs folder")
    rows = status_rows(found, now, noise)
    if html is not None:
        write_atomic(html, status_page(rows, now.strftime("%Y-%m-%dT%H:%M:%SZ")))
        progress(f"wrote {html}")
    return {"rows": [row.as_json() for row in rows], "refused": refused}
