"""Use case `lockgen fleet status`: every node x lock (or image) from certificate folders and images'
attestations, each checked (and with `--key` its signature) before it counts, with its latest result, age,
headline figures, regressions against the node's previous certificate and the nodes whose numerics differ;
as text, `--json`, or one static HTML page (`--html`), written atomically.

At fleet size (issue 48: 10,000 certificates) the folders' certificates are read node by node, each hashed and
its kept verdict taken (`kept_verdicts`: a verdict is a function of the bytes and the key), else proven once
(`certificate_steps.proven_certificate`), and reduced to its node's rows as soon as the node's last one is read,
so what is held is a few hundred bytes a node, never the certificates; the nodes are shared out among the cores
(`parallel.Forked`: children of this process, their rows sent back pickled), each share whole nodes."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import pickle
from collections.abc import Callable, Sequence
from functools import partial
from itertools import groupby
from pathlib import Path
from typing import Any, overload

from pydantic import ValidationError

from lockgen.adapters import parallel, signing, user_files
from lockgen.adapters.atomic_files import write_atomic
from lockgen.adapters.kept_verdicts import keep_verdict, kept_verdict
from lockgen.api.steps.attestation_steps import attached_certificates
from lockgen.api.steps.certificate_steps import Signers, certificate_paths, loaded_signers, proven_certificate, read_signed
from lockgen.core.fleet_html import status_page
from lockgen.core.fleet_status import CertificateFacts, StatusRow, certificate_facts, facts_from_plain, numerics_differences, status_rows
from lockgen.core.stack_layout import CERT_SUFFIX
from lockgen.errors import LockgenError, UserError
from lockgen.model.certificate import CertificateBody, Numerics


def _node_of(path: Path) -> str:
    """`n1.cert.json` (lockgen fleet slurm's name for node n1's certificate) and `n1.health.cert.json` are n1."""
    return path.name.removesuffix(CERT_SUFFIX).removesuffix(".health")


Refusal = dict[str, str]  # {node, source, reason}
NODES_PER_SHARE = 500  # fewer nodes than this to a core: a child would cost about what it saves


def fleet_status(
    sources: Sequence[str], public_keys: Sequence[Path], insecure: bool, noise: float, html: Path | None, now: dt.datetime, progress: Callable[[str], None] = lambda _: None
) -> dict[str, Any]:
    """{"rows": [...], "refused": [...], "numerics": {compared, differ: [...]}} for the certificates under each
    folder and attached to each image. Every certificate is checked as `cert verify` checks it and, with
    `public_keys`, must be signed by one of them; one that is not (changed bytes, a signature that does not
    verify, none, another signer, not a certificate) is listed under `refused` with its node and the reason,
    never shown as a result."""
    attached: list[tuple[str, str, CertificateBody]] = []
    refused: list[Refusal] = []
    keys = loaded_signers(public_keys)
    paths: list[Path] = []
    for source in sources:
        if source.startswith("docker://"):
            _, found = attached_certificates(source, public_keys, insecure, progress)
            for attestation in found:
                if attestation.body is None:
                    refused.append({"node": source.removeprefix("docker://"), "source": attestation.location, "reason": attestation.reason or ""})
                else:
                    attached.append((source.removeprefix("docker://"), attestation.location, attestation.body))
            continue
        folder = Path(source)
        if not folder.exists():
            raise UserError(f"`{source}` is neither a folder of certificates nor docker://REF", "pass folders holding *.cert.json (lockgen fleet slurm's --certs) or image references")
        paths += certificate_paths(folder)
    if not paths and not attached and not refused:
        raise UserError(f"no certificates in {', '.join(sources)}", "lockgen verify writes them (--out), lockgen fleet slurm's job into its --certs folder")
    rows, folder_refused = _folder_rows(sorted(set(paths), key=lambda path: (_node_of(path), str(path))), keys, now, noise)
    rows += status_rows([(node, source, certificate_facts(body)) for node, source, body in attached], now, noise)
    rows.sort(key=lambda row: (row.node, row.covers))
    refused += folder_refused
    if html is not None:
        write_atomic(html, status_page(rows, now.strftime("%Y-%m-%dT%H:%M:%SZ")))
        progress(f"wrote {html}")
    differ, compared = numerics_differences(rows)
    return {"rows": JsonRows(rows), "refused": refused, "numerics": {"compared": compared, "differ": [difference.as_json() for difference in differ]}}


class JsonRows(Sequence[dict[str, Any]]):
    """The rows as JSON objects, each made when it is read: a fleet's report never holds them all at once."""

    def __init__(self, rows: list[StatusRow]) -> None:
        self._rows = rows

    def __len__(self) -> int:
        return len(self._rows)

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...

    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(index, slice):
            return [row.as_json() for row in self._rows[index]]
        return self._rows[index].as_json()


def _folder_rows(paths: list[Path], keys: Signers, now: dt.datetime, noise: float) -> tuple[list[StatusRow], list[Refusal]]:
    """The rows and refusals of `paths` (sorted by node), shared out among the cores by whole nodes: a child per
    other core takes a share, this process the last; a share whose child failed is read here."""
    shares = _shares(paths, min(parallel.cores(), max(1, len(paths) // NODES_PER_SHARE)))
    children = [parallel.Forked(partial(_share_pickled, share, keys, now, noise)) for share in shares[:-1]]
    rows, refused = _share_rows(shares[-1], keys, now, noise) if shares else ([], [])
    for child, share in zip(children, shares):
        data = child.data()
        their_rows, their_refused = pickle.loads(data) if data is not None else _share_rows(share, keys, now, noise)  # our own child's bytes
        rows += their_rows
        refused += their_refused
    return rows, refused


def _shares(paths: list[Path], count: int) -> list[list[Path]]:
    """`paths` (sorted by node) cut into `count` shares of about the same size, never inside a node's certificates."""
    shares: list[list[Path]] = [[]]
    size = -(-len(paths) // max(count, 1))
    for _, group in groupby(paths, key=_node_of):
        if len(shares[-1]) >= size:
            shares.append([])
        shares[-1] += group
    return shares if shares[0] else []


def _share_pickled(paths: list[Path], keys: Signers, now: dt.datetime, noise: float) -> bytes:
    return pickle.dumps(_share_rows(paths, keys, now, noise), protocol=pickle.HIGHEST_PROTOCOL)


def _share_rows(paths: list[Path], keys: Signers, now: dt.datetime, noise: float) -> tuple[list[StatusRow], list[Refusal]]:
    """Each node's rows as soon as its certificates (consecutive in `paths`) are read: only one node's
    certificates are held at a time."""
    rows: list[StatusRow] = []
    refused: list[Refusal] = []
    numerics_by_text: dict[str, Numerics] = {}  # a fleet's nodes mostly share their fingerprint and settings: one copy of each
    stacks_by_text: dict[str, dict[str, Any]] = {}
    fingerprints = {key_id: signing.fingerprint(key) for key_id, key in keys.loaded.items()}
    accepted = set(fingerprints.values()) or {""}

    def numerics_of(text: str) -> Numerics:
        found = numerics_by_text.get(text)
        return found if found is not None else numerics_by_text.setdefault(text, Numerics.model_validate_json(text))

    def stack_of(text: str) -> dict[str, Any]:
        found = stacks_by_text.get(text)
        return found if found is not None else stacks_by_text.setdefault(text, json.loads(text))

    def facts(path: Path) -> CertificateFacts:
        return _verified_facts(path, keys, fingerprints, accepted, lambda value: facts_from_plain(value, numerics_of, stack_of))

    for node, group in groupby(paths, key=_node_of):
        found = []
        for path in group:
            try:
                found.append((node, str(path), facts(path)))
            except LockgenError as error:
                refused.append({"node": node, "source": str(path), "reason": error.message})
        rows += status_rows(found, now, noise)
    return rows, refused


def _verified_facts(path: Path, keys: Signers, fingerprints: dict[str, str], accepted: set[str], from_plain: Callable[[Any], CertificateFacts | None]) -> CertificateFacts:
    """The facts of the certificate at `path`: the kept ones when its bytes' verdict under one of the keys is kept
    (`kept_verdicts`), else those of the certificate proven now (kept when the quick proof accepted exactly the
    bytes hashed); a refusal (LockgenError) is made again every time, by `read_signed`."""
    try:
        data: bytes | None = user_files.read_bytes(path, user_files.CERTIFICATE_LIMIT, "certificate")
    except OSError:
        data = None
    if data is None:
        return certificate_facts(read_signed(path, keys.paths).certificate)  # says why it cannot be read
    sha256 = hashlib.sha256(data).hexdigest()
    kept = kept_verdict(sha256, accepted)
    if kept is not None:
        try:
            facts = from_plain(kept)
        except (ValidationError, ValueError):  # a fingerprint or evidence that is not JSON of its shape: not kept
            facts = None
        if facts is not None:
            return facts
    certificate = proven_certificate(data, keys)
    if certificate is None:
        return certificate_facts(read_signed(path, keys.paths).certificate)  # refuses it, saying why, or accepts what the quick proof cannot
    plain = certificate_facts(certificate.certificate).plain()
    signer = fingerprints.get(certificate.signature.key_id, "") if certificate.signature is not None and fingerprints else ""
    if signer or not fingerprints:
        keep_verdict(sha256, signer, plain)
    return from_plain(plain) or certificate_facts(certificate.certificate)  # the kept form: shared fingerprint and evidence
