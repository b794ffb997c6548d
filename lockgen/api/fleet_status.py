"""Use case `lockgen fleet status`: every node x lock (or image) from certificate folders and images'
attestations, each checked (and with `--key` its signature) before it counts, with its latest result, age,
headline figures, regressions against the node's previous certificate and the nodes whose numerics differ;
as text, `--json`, or one static HTML page (`--html`), written atomically."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lockgen.adapters.atomic_files import write_atomic
from lockgen.api.steps.attestation_steps import attached_certificates
from lockgen.api.steps.certificate_steps import certificate_paths, read_signed, signers
from lockgen.core.fleet_html import status_page
from lockgen.core.fleet_status import numerics_differences, status_rows
from lockgen.core.stack_layout import CERT_SUFFIX
from lockgen.errors import LockgenError, UserError
from lockgen.model.certificate import CertificateBody


def _node_of(path: Path) -> str:
    """`n1.cert.json` (lockgen fleet slurm's name for node n1's certificate) and `n1.health.cert.json` are n1."""
    return path.name.removesuffix(CERT_SUFFIX).removesuffix(".health")


def fleet_status(
    sources: Sequence[str], public_keys: Sequence[Path], insecure: bool, noise: float, html: Path | None, now: dt.datetime, progress: Callable[[str], None] = lambda _: None
) -> dict[str, Any]:
    """{"rows": [...], "refused": [...], "numerics": {compared, differ: [...]}} for the certificates under each
    folder and attached to each image. Every certificate is checked as `cert verify` checks it and, with
    `public_keys`, must be signed by one of them; one that is not (changed bytes, a signature that does not
    verify, none, another signer, not a certificate) is listed under `refused` with its node and the reason,
    never shown as a result."""
    found: list[tuple[str, str, CertificateBody]] = []
    refused: list[dict[str, str]] = []
    keys = signers(public_keys)
    for source in sources:
        if source.startswith("docker://"):
            _, attached = attached_certificates(source, public_keys, insecure, progress)
            for attestation in attached:
                if attestation.body is None:
                    refused.append({"node": source.removeprefix("docker://"), "source": attestation.location, "reason": attestation.reason or ""})
                else:
                    found.append((source.removeprefix("docker://"), attestation.location, attestation.body))
            continue
        folder = Path(source)
        if not folder.exists():
            raise UserError(f"`{source}` is neither a folder of certificates nor docker://REF", "pass folders holding *.cert.json (lockgen fleet slurm's --certs) or image references")
        for path in certificate_paths(folder):
            try:
                found.append((_node_of(path), str(path), read_signed(path, keys).certificate))
            except LockgenError as error:
                refused.append({"node": _node_of(path), "source": str(path), "reason": error.message})
    if not found and not refused:
        raise UserError(f"no certificates in {', '.join(sources)}", "lockgen verify writes them (--out), lockgen fleet slurm's job into its --certs folder")
    rows = status_rows(found, now, noise)
    if html is not None:
        write_atomic(html, status_page(rows, now.strftime("%Y-%m-%dT%H:%M:%SZ")))
        progress(f"wrote {html}")
    differ, compared = numerics_differences(rows)
    return {"rows": [row.as_json() for row in rows], "refused": refused, "numerics": {"compared": compared, "differ": [difference.as_json() for difference in differ]}}
