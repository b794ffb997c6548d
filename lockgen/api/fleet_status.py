"""Use case `lockgen fleet status`: every node x lock (or image) from certificate folders and images'
attestations, each checked (and with `--key` its signature) before it counts, with its latest result, age,
headline figures, regressions against the node's previous certificate and the nodes whose numerics differ;
as text, `--json`, or one static HTML page (`--html`), written atomically.

At fleet size (issue 48: 10,000 certificates, and 100,000) the folders are walked for certificate paths as
text, sorted by node in runs spilled to files and merged (`SortedSpill`), and cut into shares of whole nodes,
each written to a file of its own; the certificates are read node by node, each hashed and its kept verdict
taken (`kept_verdicts`: a verdict is a function of the bytes and the key), else proven once
(`certificate_proof.proven_facts`: a framed file's body validated as plain values, by the models' rules, not
built into them), and reduced to its node's rows as soon as the node's last one is read; the rows are written
to temporary files as their nodes finish and read back one at a time for the output (`SpilledRows`; `--json`
writes each row's text from its fields, `StatusRow.json_text`), and each node's (node, fingerprint) likewise,
read back only to name the nodes of a fingerprint that differs (`FleetFingerprints`): what is held is each
distinct fingerprint with its count, never a node's row, name or certificates (the HTML page, which draws every
node, holds the rows). The cores read at once: four shares a core, this process and a forked child per other
core (`parallel.Forked`) each taking the next share number from one pipe (`parallel.ShareNumbers`), writing its
shares' rows and members to their own files and sending back its counted fingerprints and refusals pickled."""

from __future__ import annotations

import datetime as dt
import hashlib
import heapq
import json
import marshal
import pickle
from contextlib import ExitStack
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import chain, groupby
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lockgen.adapters import parallel, user_files
from lockgen.adapters.node import signing
from lockgen.adapters.atomic_files import WRITABLE_HINT, check_writable, write_atomic
from lockgen.adapters.node.kept_verdicts import KeptVerdicts
from lockgen.adapters.spill_files import SortedSpill, SpillFile
from lockgen.api.steps.certificate_proof import (
    Signers,
    named_certificate_files,
    loaded_signers,
    proven_facts,
)
from lockgen.core.fleet.fleet_html import status_page
from lockgen.core.fleet.fleet_status import (
    CertificateFacts,
    StatusRow,
    certificate_facts,
    facts_from_plain,
    dated,
    plain_as_facts,
    refused_note as refused_note,  # the rows' wording, which the text says too (`cli.fleet_report`)
    status_rows,
    strict_text,
    strict_values,
)
from lockgen.core.certificate.numerics_votes import (
    CountedFingerprint,
    Member,
    OddFingerprints,
    difference_words as difference_words,  # the NUMERICS lines' wording, which the text says too (`cli.fleet_report`)
)
from lockgen.core.stack.stack_layout import CERT_SUFFIX
from lockgen.errors import LockFormatError, LockgenError, UserError
from lockgen.model.fingerprint import Fingerprint, plain_fingerprint

if TYPE_CHECKING:
    from lockgen.model.certificate import CertificateBody


def _node_of(path: str) -> str:
    """`n1.cert.json` (lockgen fleet slurm's name for node n1's certificate) and `n1.health.cert.json` are n1."""
    return path.rpartition("/")[2].removesuffix(CERT_SUFFIX).removesuffix(".health")


def _by_node(path: str) -> tuple[str, str]:
    return _node_of(path), path


Refusal = dict[str, str]  # {node, source, reason}
NODES_PER_SHARE = 500  # fewer nodes than this to a core: a child would cost about what it saves
SHARES_PER_CORE = 4  # whoever is free takes the next: a core that another program slows takes fewer
MOST_SHARES = 64  # but no more than this (three temporary files a share), or one a core where there are more
FIRST_FAILING = 5  # the failing nodes the summary names (the rows name them all)
PATHS_HELD = 20_000  # the certificate paths are sorted in runs of this many, each spilled to a file, then merged


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
    never shown as a result, and its node's rows do not pass (`StatusRow.refused`: it cannot be dated, so it may be
    the node's latest). A FOLDER is a folder or one certificate file (`named_certificate_files`)."""
    if html is not None:  # before any certificate is read: named as given, a FIFO or a device never replaced
        check_writable(html, f"--html {html}", WRITABLE_HINT, file=True)
    attached: list[tuple[str, str, CertificateBody]] = []
    refused: list[Refusal] = []
    keys = loaded_signers(public_keys)
    walks: list[Iterator[str]] = []
    for source in sources:
        if source.startswith("docker://"):
            from lockgen.api.steps.attestation_steps import attached_certificates  # images only: 0.1 s of imports

            _, found = attached_certificates(source, public_keys, insecure, progress)
            image = source.removeprefix("docker://")
            for attestation in found:
                reason = attestation.reason or ""
                if attestation.body is not None:
                    try:
                        dated(attestation.body.created, now)
                    except LockFormatError as error:  # a time its row cannot be dated by, or a future one
                        reason = error.message
                    else:
                        attached.append((image, attestation.location, attestation.body))
                        continue
                refused.append({"node": image, "source": attestation.location, "reason": reason})
            continue
        walks.append(named_certificate_files(source))
    paths = SortedSpill(chain.from_iterable(walks), _by_node, PATHS_HELD)  # by node: its certificates together
    if not paths.count and not attached and not refused:
        raise UserError(
            f"no certificates in {', '.join(sources)}",
            "lockgen verify writes them (--out), lockgen fleet slurm's job into its --certs folder",
        )
    folders = _folder_rows(paths, keys, now, noise)
    rows, fingerprints = folders.rows, folders.fingerprints
    images = status_rows(
        [(node, source, certificate_facts(body)) for node, source, body in attached],
        now,
        noise,
        Counter(entry["node"] for entry in refused),  # only the images' refusals yet
    )
    rows.add_sorted(images)
    image_members = [  # in the rows' order (by node, then what each covers), as the folders' members are
        (row.node, fingerprints.count(row.numerics, row.stack))
        for row in sorted(images, key=lambda row: (row.node, row.covers))
        if row.numerics is not None
    ]
    refused = [strict_values(entry) for entry in refused + folders.refused]  # their nodes counted: written from here on
    judged = OddFingerprints(fingerprints.counted)
    members = heapq.merge(fingerprints.members(judged), image_members, key=lambda member: member[0])
    differ = [strict_values(difference.as_json()) for difference in judged.differences(members)]
    if html is not None:  # the page draws every node: it holds them
        generated = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        write_atomic(html, status_page(list(rows.rows()), generated, refused, differ, bool(public_keys)))
        progress(f"wrote {html}")
    return {"rows": rows, "refused": refused, "numerics": {"compared": judged.compared, "differ": differ}}


class FleetFingerprints:
    """The fleet's numerics fingerprints as the comparison needs them, held in memory whatever the count: each
    distinct fingerprint and stack (as their JSON text: the shares' copies are one) with how many nodes share it
    (`counted`), and each node's (node, index) written to the shares' files in node order (`members`), read back
    only for the fingerprints that are named (`OddFingerprints`: the majority's names are never needed)."""

    def __init__(self) -> None:
        self.counted: list[CountedFingerprint] = []
        self._index: dict[tuple[str, str], int] = {}
        self._spilled: list[tuple[SpillFile, int, list[int]]] = []  # (file, records, its indices -> ours)

    def count(self, numerics: Fingerprint, stack: dict[str, Any], nodes: int = 1) -> int:
        """Counts `nodes` more nodes of this fingerprint and stack; its index."""
        text = (json.dumps(numerics.as_json(), sort_keys=True), json.dumps(stack, sort_keys=True))
        index = self._index.setdefault(text, len(self.counted))
        if index == len(self.counted):
            self.counted.append(CountedFingerprint(numerics, stack, 0))
        self.counted[index] = CountedFingerprint(numerics, stack, self.counted[index].nodes + nodes)
        return index

    def add_share(self, share: ShareFingerprints, members: SpillFile) -> None:
        indices = [self.count(numerics, stack, nodes) for numerics, stack, nodes in share.counted]
        self._spilled.append((members, share.members, indices))

    def members(self, judged: OddFingerprints) -> Iterator[Member]:
        """(node, index) of each node counted, in node order (the shares are), read back from the shares' files
        when any fingerprint is named (none: no name is needed, nothing is read)."""
        if not any(judged.named(index) for index in range(len(self.counted))):
            return
        for spill, count, indices in self._spilled:
            for node, local in spill.records(count):
                yield node, indices[local]


@dataclass(frozen=True)
class ShareFingerprints:
    """A share's fingerprints: each distinct fingerprint and stack with how many of its nodes share it, and how
    many (node, index into `counted`) records it wrote to its members' file."""

    counted: list[tuple[Fingerprint, dict[str, Any], int]]
    members: int


@dataclass(frozen=True)
class Failing:
    """The rows that did not pass: how many failed, how many are of a node with a refused certificate (counted
    apart: refused, not failed), and the nodes of the first FIRST_FAILING of both."""

    failed: int
    refused: int
    first: list[str]


class SpilledRows:
    """A fleet's rows as JSON objects, each made when it is read, from unnamed temporary files the rows were
    written to as their nodes finished (marshal records, one per row, in node order): no row is held;
    iterable any number of times, as `--json` and the text do."""

    def __init__(
        self, files: list[tuple[SpillFile, int]], failing: list[tuple[str, str]], failed: int, refused: int
    ) -> None:
        self._files = files  # (file, how many rows it holds), in node order
        self._failing = failing  # (node, covers) of the first rows not passed (FIRST_FAILING a share), in node order
        self._failed = failed  # how many rows failed, their node's certificates all accepted
        self._refused = refused  # how many rows are of a node with a refused certificate (`StatusRow.refused`)
        self._images: list[StatusRow] = []  # attestations' rows: an image per source, held

    def add_sorted(self, images: list[StatusRow]) -> None:
        self._images = sorted(images, key=lambda row: (row.node, row.covers))

    def __len__(self) -> int:
        return sum(count for _, count in self._files) + len(self._images)

    def failing(self) -> Failing:
        """How many rows failed, how many are refused (of a node with a refused certificate: not passed, but not
        failed either), and the nodes of the first FIRST_FAILING of both in the rows' order (noted as the rows were
        spilled, not read back: a fleet's failing nodes are counted, not held)."""
        images = [row for row in self._images if not row.passed]
        merged = heapq.merge(self._failing, [(row.node, row.covers) for row in images])
        first = [strict_text(node) for node, _ in merged]  # as the rows say them
        refused = sum(1 for row in images if row.refused)
        return Failing(self._failed + len(images) - refused, self._refused + refused, first[:FIRST_FAILING])

    def rows(self) -> Iterator[StatusRow]:
        return heapq.merge(self._spilled(), self._images, key=lambda row: (row.node, row.covers))

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (row.as_json() for row in self.rows())

    def json_texts(self, depth: int) -> Iterator[str]:
        """Each row's JSON as `json.dumps(row, indent=2, sort_keys=True)` writes it, its lines after the first
        indented `depth` levels more (`--json` writes them into the report as they are made), by
        `StatusRow.json_text`: json's indenting encoder is its pure-Python one (0.3 s of 10,000 rows)."""
        return (row.json_text(depth) for row in self.rows())

    def _spilled(self) -> Iterator[StatusRow]:
        for spill, count in self._files:
            for record in spill.records(count):  # `_spill`'s
                yield StatusRow(*record)


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
            row.refused,
        )
    )


@dataclass(frozen=True)
class ShareRead:
    """A share of the folders' certificates read: how many rows it wrote, how many of them failed, how many are
    refused (`SpilledRows.failing`) and the first FIRST_FAILING of both (node, covers), its nodes' latest
    fingerprints (counted), the refusals."""

    rows: int
    failed: int
    refused_rows: int
    failing: list[tuple[str, str]]
    fingerprints: ShareFingerprints
    refused: list[Refusal]


@dataclass(frozen=True)
class FoldersRead:
    """The folders' certificates read: their rows (spilled), their nodes' latest fingerprints, the refusals."""

    rows: SpilledRows
    fingerprints: FleetFingerprints
    refused: list[Refusal]


def _folder_rows(paths: SortedSpill, keys: Signers, now: dt.datetime, noise: float) -> FoldersRead:
    """The rows (spilled), fingerprints and refusals of `paths` (sorted by node), shared out among the cores by
    whole nodes: the paths are cut into `SHARES_PER_CORE` shares a core (`MOST_SHARES` at most, or one a core),
    and a child per other core and this process take the next share until none is left (`parallel.ShareNumbers`:
    a core slowed by another program's work takes fewer), each share's rows and its nodes' fingerprints written
    to temporary files of its own (made here, so this process reads them back in the shares' order); a share a
    failed child took is read here again, and the children are ended when this process fails or is interrupted."""
    cores = min(parallel.cores(), max(1, paths.count // NODES_PER_SHARE))
    shares = _shares(paths, max(cores, min(cores * SHARES_PER_CORE, MOST_SHARES)) if cores > 1 else 1)
    streams = [(SpillFile(), SpillFile()) for _ in shares]
    taken: dict[int, ShareRead] = {}
    with parallel.ShareNumbers(len(shares)) as numbers, ExitStack() as started:
        work = partial(_taken, numbers, shares, streams, keys, now, noise)
        children = [
            started.enter_context(parallel.Forked(partial(_pickled, work)))
            for _ in range(cores - 1 if numbers.shared else 0)
        ]
        try:
            taken.update(work())  # while the children take theirs
            for child in children:
                data = child.data()
                taken.update(pickle.loads(data) if data is not None else {})  # our own child's bytes
        except BaseException:  # an error or Ctrl-C: no child is left reading its shares
            for child in children:
                child.stop()
            raise
    left = [number for number in range(len(shares)) if number not in taken]  # the shares of a failed child
    if left:
        with KeptVerdicts() as kept:  # read here, in one pack (what the child wrote is written again)
            for number in left:
                streams[number][0].clear()
                streams[number][1].clear()
                taken[number] = _share_rows(shares[number], streams[number], keys, now, noise, kept)
    reads = [taken[number] for number in range(len(shares))]
    files: list[tuple[SpillFile, int]] = []
    failing: list[tuple[str, str]] = []
    failed = refused_rows = 0
    fingerprints = FleetFingerprints()
    refused: list[Refusal] = []
    for read, stream in zip(reads, streams):
        files.append((stream[0], read.rows))
        failing += read.failing
        failed += read.failed
        refused_rows += read.refused_rows
        fingerprints.add_share(read.fingerprints, stream[1])
        refused += read.refused
    return FoldersRead(SpilledRows(files, failing, failed, refused_rows), fingerprints, refused)


Share = tuple[SpillFile, int]  # a share's paths, in node order, and how many


def _shares(paths: SortedSpill, count: int) -> list[Share]:
    """`paths` (sorted by node; one path given twice is read once) cut into `count` shares of about the same size,
    never inside a node's certificates, each written to a file of its own (the paths are never one list)."""
    size = -(-paths.count // max(count, 1))
    shares: list[Share] = []
    written, previous = size, None
    for _, group in groupby(paths, key=_node_of):
        if written >= size:
            if shares:
                shares[-1][0].finish()
            shares.append((SpillFile(), 0))
            written = 0
        spill, held = shares[-1]
        for path in group:
            if path != previous:
                spill.append(path)
                held, written, previous = held + 1, written + 1, path
        shares[-1] = (spill, held)
    if shares:
        shares[-1][0].finish()
    return shares


Streams = tuple[SpillFile, SpillFile]  # a share's rows, and its nodes' (node, fingerprint index)


def _taken(
    numbers: parallel.ShareNumbers,
    shares: list[Share],
    streams: list[Streams],
    keys: Signers,
    now: dt.datetime,
    noise: float,
) -> dict[int, ShareRead]:
    """The shares this process takes from `numbers` until none is left, read, by their number; what it proves is
    kept as one pack (`KeptVerdicts`), written when the last is read."""
    with KeptVerdicts() as kept:
        return {
            number: _share_rows(shares[number], streams[number], keys, now, noise, kept) for number in numbers.taken()
        }


def _pickled(work: Callable[[], dict[int, ShareRead]]) -> bytes:
    return pickle.dumps(work(), protocol=pickle.HIGHEST_PROTOCOL)


def _share_rows(
    share: Share, streams: Streams, keys: Signers, now: dt.datetime, noise: float, kept: KeptVerdicts
) -> ShareRead:
    """Each node's rows written to the first of `streams` as soon as its certificates (consecutive in `paths`)
    are read, and (node, index of its fingerprint) to the second: only one node's certificates and rows are
    held at a time; returned: how many rows, the fingerprints counted, the refusals."""
    stream, members = streams
    count = failed = refused_rows = 0
    failing: list[tuple[str, str]] = []
    counted: list[tuple[Fingerprint, dict[str, Any], int]] = []
    index_of: dict[tuple[int, int], int] = {}  # by the fingerprint's and the stack's objects (shared, below)
    written = 0
    refused: list[Refusal] = []
    kept_keys = {key_id: signing.fingerprint(key) for key_id, key in keys.loaded.items()}
    accepted = set(kept_keys.values()) or {""}
    shared = SharedFacts()

    def facts(path: str) -> CertificateFacts:
        found = _verified_facts(path, keys, kept_keys, accepted, kept, shared)
        dated(found.created, now)  # a time a row cannot be dated by (or a future one): this certificate refused
        return found

    for node, group in groupby(share[0].records(share[1]), key=_node_of):
        found, refusals = [], len(refused)
        for path in group:
            try:
                found.append((node, path, facts(path)))
            except LockgenError as error:
                refused.append({"node": node, "source": str(path), "reason": error.message})
        for row in status_rows(found, now, noise, {node: len(refused) - refusals}):
            _spill(row, stream)
            count += 1
            if not row.passed:
                if row.refused:
                    refused_rows += 1
                else:
                    failed += 1
                if failed + refused_rows <= FIRST_FAILING:
                    failing.append((row.node, row.covers))
            if row.numerics is not None:
                index = index_of.setdefault((id(row.numerics), id(row.stack)), len(counted))
                if index == len(counted):
                    counted.append((row.numerics, row.stack, 0))
                numerics, stack, nodes = counted[index]
                counted[index] = (numerics, stack, nodes + 1)
                members.append((row.node, index))
                written += 1
    stream.finish()
    members.finish()
    return ShareRead(count, failed, refused_rows, failing, ShareFingerprints(counted, written), refused)


class SharedFacts:
    """Certificate facts made of their plain values with one copy of each fingerprint and evidence (a fleet's nodes
    mostly share their fingerprint and settings), by their bytes (`CertificateFacts.plain`)."""

    def __init__(self) -> None:
        self._numerics: dict[bytes, Fingerprint] = {}
        self._stacks: dict[bytes, dict[str, Any]] = {}

    def numerics(self, data: bytes) -> Fingerprint:
        found = self._numerics.get(data)
        if found is None:
            found = self._numerics[data] = plain_fingerprint(marshal.loads(data))
        return found

    def stack(self, data: bytes) -> dict[str, Any]:
        found = self._stacks.get(data)
        if found is None:
            loaded = marshal.loads(data)
            if type(loaded) is not dict:
                raise ValueError("the evidence is not an object")
            found = self._stacks[data] = loaded
        return found

    def kept(self, value: object) -> CertificateFacts | None:
        """The facts of a kept verdict's values; None when they are not of their shape (ValueError when a fingerprint
        or evidence is not)."""
        return facts_from_plain(value, self.numerics, self.stack)

    def proven(self, value: list[Any]) -> CertificateFacts:
        """The facts of the values this process made of a certificate it proved."""
        return plain_as_facts(value, self.numerics, self.stack)


def _verified_facts(
    path: str,
    keys: Signers,
    fingerprints: dict[str, str],
    accepted: set[str],
    kept_verdicts: KeptVerdicts,
    shared: SharedFacts,
) -> CertificateFacts:
    """The facts of the certificate at `path`: the kept ones when its bytes' verdict under one of the keys is kept
    (`kept_verdicts`), else those of the certificate proven now (kept when the quick proof accepted exactly the
    bytes hashed); a refusal (LockgenError) is made again every time, by `read_signed`."""
    try:
        data: bytes | None = user_files.read_bytes(path, user_files.CERTIFICATE_LIMIT, "certificate")
    except OSError:
        data = None
    if data is None:
        return _read_signed(path, keys)  # says why it cannot be read
    sha256 = hashlib.sha256(data).hexdigest()
    kept = kept_verdicts.verdict(sha256, accepted)
    if kept is not None:
        try:
            facts = shared.kept(kept)
        except (ValueError, EOFError, TypeError):  # a fingerprint or evidence not of its shape
            facts = None
        if facts is not None:
            return facts
    proven = proven_facts(data, keys)
    if proven is None:
        return _read_signed(path, keys)  # refuses it, saying why, or accepts what the quick proof cannot
    signer = fingerprints.get(proven.key_id, "") if proven.key_id is not None and fingerprints else ""
    if signer or not fingerprints:
        kept_verdicts.keep(sha256, signer, proven.plain)
    return shared.proven(proven.plain)  # the kept form: shared fingerprint and evidence


def _read_signed(path: str, keys: Signers) -> CertificateFacts:
    """The facts of the certificate at `path` as `cert verify` reads it, by the models (`certificate_steps`,
    imported only for a certificate the quick proof did not prove); LockgenError saying why it is refused."""
    from lockgen.api.steps.certificate_steps import read_signed

    return certificate_facts(read_signed(Path(path), keys.paths).certificate)
