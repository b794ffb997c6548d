"""Use case `lockgen fleet status`: every node x lock (or image) from certificate folders and images'
attestations, each checked (and with `--key` its signature) before it counts, with its latest result, age,
headline figures, regressions against the node's previous certificate and the nodes whose numerics differ;
as text, `--json`, or one static HTML page (`--html`), written atomically.

At fleet size (issue 48: 10,000 certificates) the folders' certificates are read node by node, each hashed and
its kept verdict taken (`kept_verdicts`: a verdict is a function of the bytes and the key), else proven once
(`certificate_steps.proven_certificate`), and reduced to its node's rows as soon as the node's last one is read;
the rows are written to temporary files as their nodes finish and read back one at a time for the output
(`SpilledRows`), so what is held per node is its fingerprint (shared among the nodes alike), never its row or
certificates (the HTML page, which draws every node, holds the rows); the nodes are shared out among the
cores (`parallel.Forked`: children of this process, each writing its share's rows to its own file and sending
back its fingerprints and refusals pickled), each share whole nodes."""

from __future__ import annotations

import datetime as dt
import hashlib
import heapq
import json
import pickle
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import groupby
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from lockgen.adapters import parallel, user_files
from lockgen.adapters.node import signing
from lockgen.adapters.atomic_files import write_atomic
from lockgen.adapters.node.kept_verdicts import keep_verdict, kept_verdict
from lockgen.adapters.spill_files import SpillFile
from lockgen.api.steps.attestation_steps import attached_certificates
from lockgen.api.steps.certificate_steps import (
    Signers,
    certificate_paths,
    loaded_signers,
    proven_certificate,
    read_signed,
)
from lockgen.core.fleet.fleet_html import status_page
from lockgen.core.fleet.fleet_status import (
    CertificateFacts,
    StatusRow,
    certificate_facts,
    facts_from_plain,
    status_rows,
)
from lockgen.core.certificate.numerics import odd_nodes
from lockgen.core.stack.stack_layout import CERT_SUFFIX
from lockgen.errors import LockgenError, UserError
from lockgen.model.certificate import CertificateBody, Numerics


def _node_of(path: Path) -> str:
    """`n1.cert.json` (lockgen fleet slurm's name for node n1's certificate) and `n1.health.cert.json` are n1."""
    return path.name.removesuffix(CERT_SUFFIX).removesuffix(".health")


Refusal = dict[str, str]  # {node, source, reason}
NODES_PER_SHARE = 500  # fewer nodes than this to a core: a child would cost about what it saves


def fleet_status(
    sources: Sequence[str],
    public_keys: Sequence[Path],
    insecure: bool,
    noise: float,
    html: Path | None,
    now: dt.datetime,
    progress: Callable[[str], None] = lambda _: None,
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
                    refused.append(
                        {
                            "node": source.removeprefix("docker://"),
                            "source": attestation.location,
                            "reason": attestation.reason or "",
                        }
                    )
                else:
                    attached.append((source.removeprefix("docker://"), attestation.location, attestation.body))
            continue
        folder = Path(source)
        if not folder.exists():
            raise UserError(
                f"`{source}` is neither a folder of certificates nor docker://REF",
                "pass folders holding *.cert.json (lockgen fleet slurm's --certs) or image references",
            )
        paths += certificate_paths(folder)
    if not paths and not attached and not refused:
        raise UserError(
            f"no certificates in {', '.join(sources)}",
            "lockgen verify writes them (--out), lockgen fleet slurm's job into its --certs folder",
        )
    folders = _folder_rows(sorted(set(paths), key=lambda path: (_node_of(path), str(path))), keys, now, noise)
    rows, fingerprints = folders.rows, folders.fingerprints
    images = status_rows([(node, source, certificate_facts(body)) for node, source, body in attached], now, noise)
    rows.add_sorted(images)
    fingerprints += [(row.node, Fingerprint(row.numerics, row.stack)) for row in images if row.numerics is not None]
    refused += folders.refused
    if html is not None:
        write_atomic(
            html, status_page(list(rows.rows()), now.strftime("%Y-%m-%dT%H:%M:%SZ"))
        )  # the page draws every node: it holds them
        progress(f"wrote {html}")
    differ, compared = odd_nodes(sorted(fingerprints, key=lambda item: item[0]))
    return {
        "rows": rows,
        "refused": refused,
        "numerics": {"compared": compared, "differ": [difference.as_json() for difference in differ]},
    }


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """What the numerics comparison reads of a node's latest certificate (`numerics.Fingerprinted`): the
    fingerprint and the stack's cause evidence, each shared among the nodes alike, all a fleet keeps per node."""

    numerics: Numerics | None
    stack: dict[str, Any]


class SpilledRows:
    """A fleet's rows as JSON objects, each made when it is read, from unnamed temporary files the rows were
    written to as their nodes finished (marshal records, one per row, in node order): what is held per node is
    its fingerprint (`Fingerprint`), never its row; iterable any number of times, as `--json` and the text do."""

    def __init__(self, files: list[tuple[SpillFile, int]]) -> None:
        self._files = files  # (file, how many rows it holds), in node order
        self._images: list[StatusRow] = []  # attestations' rows: an image per source, held

    def add_sorted(self, images: list[StatusRow]) -> None:
        self._images = sorted(images, key=lambda row: (row.node, row.covers))

    def __len__(self) -> int:
        return sum(count for _, count in self._files) + len(self._images)

    def rows(self) -> Iterator[StatusRow]:
        return heapq.merge(self._spilled(), self._images, key=lambda row: (row.node, row.covers))

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (row.as_json() for row in self.rows())

    def _spilled(self) -> Iterator[StatusRow]:
        for spill, count in self._files:
            for (
                node,
                covered,
                source,
                created,
                age_s,
                arch,
                passed,
                failed,
                figures,
                regressions,
                certificates,
            ) in spill.records(count):
                yield StatusRow(
                    node, covered, source, created, age_s, arch, passed, failed, figures, regressions, certificates
                )


def _spill(row: StatusRow, spill: SpillFile) -> None:
    spill.append(
        (
            row.node,
            row.covers,
            row.source,
            row.created,
            row.age_s,
            row.arch,
            row.passed,
            row.failed,
            row.figures,
            row.regressions,
            row.certificates,
        )
    )


NodeFingerprints = list[tuple[str, Fingerprint]]


@dataclass(frozen=True)
class ShareRead:
    """A share of the folders' certificates read: how many rows it wrote, each node's latest fingerprint, the
    refusals."""

    rows: int
    fingerprints: NodeFingerprints
    refused: list[Refusal]


@dataclass(frozen=True)
class FoldersRead:
    """The folders' certificates read: their rows (spilled), each node's latest fingerprint, the refusals."""

    rows: SpilledRows
    fingerprints: NodeFingerprints
    refused: list[Refusal]


def _folder_rows(paths: list[Path], keys: Signers, now: dt.datetime, noise: float) -> FoldersRead:
    """The rows (spilled), fingerprints and refusals of `paths` (sorted by node), shared out among the cores by
    whole nodes: a child per other core takes a share, writing its rows to a temporary file of its own (made
    here, so this process reads it back), this process the last; a share whose child failed is read here."""
    shares = _shares(paths, min(parallel.cores(), max(1, len(paths) // NODES_PER_SHARE)))
    streams = [SpillFile() for _ in shares]
    children = [
        parallel.Forked(partial(_share_pickled, share, stream, keys, now, noise))
        for share, stream in zip(shares[:-1], streams)
    ]
    files: list[tuple[SpillFile, int]] = []
    fingerprints: NodeFingerprints = []
    refused: list[Refusal] = []
    for index, (share, stream) in enumerate(zip(shares, streams)):
        data = children[index].data() if index < len(children) else None
        if data is None:  # this process's share, or one whose child failed (what it wrote is written again)
            stream.clear()
        read: ShareRead = (
            pickle.loads(data) if data is not None else _share_rows(share, stream, keys, now, noise)
        )  # our own child's bytes
        files.append((stream, read.rows))
        fingerprints += read.fingerprints
        refused += read.refused
    return FoldersRead(SpilledRows(files), fingerprints, refused)


def _shares(paths: list[Path], count: int) -> list[list[Path]]:
    """`paths` (sorted by node) cut into `count` shares of about the same size, never inside a node's certificates."""
    shares: list[list[Path]] = [[]]
    size = -(-len(paths) // max(count, 1))
    for _, group in groupby(paths, key=_node_of):
        if len(shares[-1]) >= size:
            shares.append([])
        shares[-1] += group
    return shares if shares[0] else []


def _share_pickled(paths: list[Path], stream: SpillFile, keys: Signers, now: dt.datetime, noise: float) -> bytes:
    return pickle.dumps(_share_rows(paths, stream, keys, now, noise), protocol=pickle.HIGHEST_PROTOCOL)


def _share_rows(paths: list[Path], stream: SpillFile, keys: Signers, now: dt.datetime, noise: float) -> ShareRead:
    """Each node's rows written to `stream` as soon as its certificates (consecutive in `paths`) are read:
    only one node's certificates and rows are held at a time; returned: how many rows, each node's latest
    fingerprint, the refusals."""
    count = 0
    fingerprints: NodeFingerprints = []
    refused: list[Refusal] = []
    numerics_by_text: dict[
        str, Numerics
    ] = {}  # a fleet's nodes mostly share their fingerprint and settings: one copy of each
    stacks_by_text: dict[str, dict[str, Any]] = {}
    kept_keys = {key_id: signing.fingerprint(key) for key_id, key in keys.loaded.items()}
    accepted = set(kept_keys.values()) or {""}

    def numerics_of(text: str) -> Numerics:
        found = numerics_by_text.get(text)
        return found if found is not None else numerics_by_text.setdefault(text, Numerics.model_validate_json(text))

    def stack_of(text: str) -> dict[str, Any]:
        found = stacks_by_text.get(text)
        return found if found is not None else stacks_by_text.setdefault(text, json.loads(text))

    def facts(path: Path) -> CertificateFacts:
        return _verified_facts(
            path, keys, kept_keys, accepted, lambda value: facts_from_plain(value, numerics_of, stack_of)
        )

    for node, group in groupby(paths, key=_node_of):
        found = []
        for path in group:
            try:
                found.append((node, str(path), facts(path)))
            except LockgenError as error:
                refused.append({"node": node, "source": str(path), "reason": error.message})
        for row in status_rows(found, now, noise):
            _spill(row, stream)
            count += 1
            if row.numerics is not None:
                fingerprints.append((row.node, Fingerprint(row.numerics, row.stack)))
    stream.finish()
    return ShareRead(count, fingerprints, refused)


def _verified_facts(
    path: Path,
    keys: Signers,
    fingerprints: dict[str, str],
    accepted: set[str],
    from_plain: Callable[[Any], CertificateFacts | None],
) -> CertificateFacts:
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
        return certificate_facts(
            read_signed(path, keys.paths).certificate
        )  # refuses it, saying why, or accepts what the quick proof cannot
    plain = certificate_facts(certificate.certificate).plain()
    signer = (
        fingerprints.get(certificate.signature.key_id, "") if certificate.signature is not None and fingerprints else ""
    )
    if signer or not fingerprints:
        keep_verdict(sha256, signer, plain)
    return from_plain(plain) or certificate_facts(
        certificate.certificate
    )  # the kept form: shared fingerprint and evidence
