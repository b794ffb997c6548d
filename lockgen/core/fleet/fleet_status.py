"""The fleet at a glance, from certificates: one row per node and lock (or image) with the latest result, its
age, the headline figures and the regressions against that node's previous certificate of the same lock (the
nodes whose latest numerics fingerprint differs from the others of its key:
`core.certificate.numerics_votes.OddFingerprints`).

A node is named by where its certificate came from (`n1.cert.json` from `lockgen fleet slurm` is node
`n1`; an attestation by its image), since certificates do not record a host name."""

from __future__ import annotations

import datetime as dt
import json
import marshal
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii
from typing import TYPE_CHECKING, Any

from lockgen.errors import LockFormatError
from lockgen.model.certificate_time import CREATED_FORM, created_moment, created_text
from lockgen.model.fingerprint import Fingerprint, fingerprint_of
from lockgen.model.names import shown, undecoded_escaped

if TYPE_CHECKING:  # the models only where a certificate read by them is reduced (`certificate_facts`)
    from lockgen.model.certificate import CertificateBody, FigureReadings

HEADLINES = (  # (group, name, label): the figures a person compares across nodes
    ("gemm", "bf16", "bf16 GEMM"),
    ("conv", "bf16", "bf16 convolution"),
    ("training", "bf16_step_ms", "bf16 training step"),
    ("bandwidth", "device_copy", "device copy"),
    ("allreduce", "1024MiB", "all-reduce 1 GiB"),
)


UNCOMPARED = frozenset({"phases"})  # the figures no regression names: the phases' timings


@dataclass(frozen=True, slots=True)  # slots: a fleet's status holds one per node
class StatusRow:
    node: str
    covers: str  # "lock 1a2b3c4d5e6f", "image sha256:…", or "no lock"
    source: str
    created: str
    age_s: float
    arch: str
    passed: bool  # its latest certificate passed and none of its node's was refused (`refused`)
    failed: tuple[str, ...]
    figures: dict[str, tuple[float, str]]  # label -> (value, unit)
    regressions: tuple[str, ...]  # figure changes worse than the noise, against the previous certificate
    certificates: int  # how many certificates of this node and lock were seen
    refused: int  # how many of its node's certificates were refused: any of them may be its latest (`_row`)
    numerics: Fingerprint | None = None  # the latest certificate's fingerprint
    stack: dict[str, Any] = field(
        default_factory=dict, repr=False, compare=False
    )  # of its kernel's stack, what names a cause: settings, foreign libraries

    def as_json(self) -> dict[str, object]:
        """The row as `--json` writes it (and the text reads it): strict JSON, every text `strict_text`."""
        return {
            "node": strict_text(self.node),
            "covers": strict_text(self.covers),
            "source": strict_text(self.source),
            "created": strict_text(self.created),
            "age_s": round(self.age_s),
            "age": age_text(self.age_s),
            "arch": strict_text(self.arch),
            "passed": self.passed,
            "refused": self.refused,
            "failed": [strict_text(name) for name in self.failed],
            "figures": {
                strict_text(label): {"value": value, "unit": strict_text(unit)}
                for label, (value, unit) in self.figures.items()
            },
            "regressions": [strict_text(change) for change in self.regressions],
            "certificates": self.certificates,
        }

    def json_text(self, depth: int) -> str:
        """`json.dumps(self.as_json(), indent=2, sort_keys=True)` byte for byte, its lines after the first indented
        `depth` levels more (`fleet status --json` writes its rows into the report one at a time): written from the
        row's fields in their sorted order, not through json's indenting encoder (its pure-Python one: 10,000 rows
        took 0.3 s of a status, after the cores' work, in this process alone)."""
        row = "\n" + "  " * depth
        key, item, inner = row + "  ", row + "    ", row + "      "
        figures = ("," + item).join(
            f'{_text(label)}: {{{inner}"unit": {_text(unit)},{inner}"value": {_number(value)}{item}}}'
            for label, (value, unit) in sorted(self.figures.items())
        )
        return "".join(
            (
                "{",
                f'{key}"age": {_text(age_text(self.age_s))},',
                f'{key}"age_s": {round(self.age_s)},',
                f'{key}"arch": {_text(self.arch)},',
                f'{key}"certificates": {self.certificates},',
                f'{key}"covers": {_text(self.covers)},',
                f'{key}"created": {_text(self.created)},',
                f'{key}"failed": {_texts(self.failed, item, key)},',
                f'{key}"figures": ' + (f"{{{item}{figures}{key}}}," if figures else "{},"),
                f'{key}"node": {_text(self.node)},',
                f'{key}"passed": {"true" if self.passed else "false"},',
                f'{key}"refused": {self.refused},',
                f'{key}"regressions": {_texts(self.regressions, item, key)},',
                f'{key}"source": {_text(self.source)}',
                row,
                "}",
            )
        )


def strict_text(text: str) -> str:
    """`text` as strict JSON carries it: a name of a file's bytes that are not UTF-8 (a node's, a path: lone
    surrogates, which strict parsers refuse) with those bytes escaped (`undecoded_escaped`: `\\xff`)."""
    return text if text.isascii() else undecoded_escaped(text)


def strict_values(value: Any) -> Any:
    """A refusal's or a difference's values with every text as strict JSON carries it (`strict_text`): a node named
    by a file's name that is not UTF-8 has its bytes escaped, as the rows do."""
    if isinstance(value, str):
        return strict_text(value)
    if isinstance(value, dict):
        return {strict_text(name): strict_values(item) for name, item in value.items()}
    if isinstance(value, list):
        return [strict_values(item) for item in value]
    return value


def _text(text: str) -> str:
    """A text as `json.dumps` writes `strict_text(text)`."""
    return encode_basestring_ascii(strict_text(text))


def _number(value: float) -> str:
    """A float as json writes it, its repr; ValueError for NaN and the infinities, as json's `allow_nan=False`
    refuses them (`--json` is strict JSON: a certificate's figures are finite, the model refuses any other)."""
    return float.__repr__(value) if value - value == 0.0 else json.dumps(value, allow_nan=False)


def _texts(texts: tuple[str, ...], item: str, end: str) -> str:
    """A list of text as json's indenting encoder writes it, its items on lines beginning `item`."""
    return f"[{item}" + ("," + item).join(map(_text, texts)) + f"{end}]" if texts else "[]"


@dataclass(frozen=True, slots=True)
class CertificateFacts:
    """Of one verified certificate, what the status reads: what it covers, when, its verdict, its figures' values
    and units (all but the phases' timings, which no regression names: for the regressions of the node's next
    certificate), its fingerprint and its stack's cause evidence. A fleet's folders keep these per certificate's
    bytes and key (`adapters.node.kept_verdicts`) as `plain` values, the fingerprint and the evidence as bytes
    (`_shared`), by which the certificates of a fleet share one copy of each."""

    covers: str
    created: str
    arch: str
    passed: bool
    failed: tuple[str, ...]
    figures: FigureReadings
    numerics: Fingerprint | None
    stack: dict[str, Any]

    def plain(self) -> list[Any]:
        """The facts as values marshal holds (`facts_from_plain` reads them back)."""
        numerics = _shared(self.numerics.as_json()) if self.numerics is not None else None
        return [
            self.covers,
            self.created,
            self.arch,
            self.passed,
            list(self.failed),
            self.figures,
            numerics,
            _shared(self.stack),
        ]


FAILED = 4  # where `plain` holds the failed checks' names


def _shared(value: Any) -> bytes:
    """A fingerprint or evidence as the bytes a fleet's certificates share one copy of each by: marshal's version 2,
    which writes no references nor interning, so equal values (their keys in the same order) are equal bytes."""
    return marshal.dumps(value, 2)


def certificate_facts(body: CertificateBody) -> CertificateFacts:
    from lockgen.model.certificate import readings

    return CertificateFacts(
        covers=covers(body.subject.lock_sha256, body.subject.image_digest),
        created=body.created,
        arch=body.arch,
        passed=body.passed,
        failed=tuple(f"{c.category}/{c.name}" for c in body.failures()),
        figures=readings(body.figures, leave_out=UNCOMPARED),
        numerics=None if body.numerics is None else fingerprint_of(body.numerics),
        stack=cause_evidence(body.stack),
    )


def plain_facts(body: dict[str, Any]) -> list[Any]:
    """`certificate_facts(...).plain()` of a body validated as plain values (`adapters.node.kept_schema.plain_body`:
    a field with a default may be absent, so it is read with its default) without building its models; the
    fingerprint as the plain object it was validated as (`facts_from_plain` reads it into a `Fingerprint`)."""
    subject, numerics = body["subject"], body.get("numerics")
    return [
        covers(subject.get("lock_sha256"), subject.get("image_digest")),
        body["created"],
        body["arch"],
        body["passed"],
        [f"{check['category']}/{check['name']}" for check in body["checks"] if not check["passed"]],
        {
            group: {name: {"value": figure["value"], "unit": figure["unit"]} for name, figure in entries.items()}
            for group, entries in body["figures"].items()
            if group not in UNCOMPARED
        },
        None if numerics is None else _shared(numerics),
        _shared(cause_evidence(body["stack"])),
    ]


def facts_from_plain(
    value: object, numerics_of: Callable[[bytes], Fingerprint], stack_of: Callable[[bytes], dict[str, Any]]
) -> CertificateFacts | None:
    """`CertificateFacts.plain`'s values read back (a kept verdict's) as facts again, None when they are not of that
    shape; `numerics_of` and `stack_of` make the fingerprint and the evidence of their bytes (and may share one
    copy of each)."""
    if type(value) is not list or len(value) != 8:
        return None
    covered, created, arch, passed, failed, figures, numerics, stack = value
    if not (
        type(covered) is str
        and type(created) is str
        and type(arch) is str
        and type(passed) is bool
        and type(stack) is bytes
    ):
        return None
    if not (
        type(failed) is list
        and all(type(name) is str for name in failed)
        and type(figures) is dict
        and (numerics is None or type(numerics) is bytes)
    ):
        return None
    if not all(
        type(entries) is dict and all(type(entry) is dict for entry in entries.values()) for entries in figures.values()
    ):
        return None
    return plain_as_facts(value, numerics_of, stack_of)


def plain_as_facts(
    value: list[Any], numerics_of: Callable[[bytes], Fingerprint], stack_of: Callable[[bytes], dict[str, Any]]
) -> CertificateFacts:
    """Plain values this process made (`plain_facts`, `CertificateFacts.plain`) as facts, their shape known."""
    covered, created, arch, passed, failed, figures, numerics, stack = value
    return CertificateFacts(
        sys.intern(covered),
        created,
        sys.intern(arch),
        passed,
        tuple(failed),
        figures,
        None if numerics is None else numerics_of(numerics),
        stack_of(stack),
    )


@dataclass
class _Group:
    entries: list[tuple[str, CertificateFacts]] = field(default_factory=list)


def covers(lock_sha256: str | None, image_digest: str | None) -> str:
    """What a certificate covers, by its subject's lock or image digest."""
    if lock_sha256:
        return f"lock {lock_sha256[:12]}"
    if image_digest:
        return f"image {image_digest[:19]}"
    return "no lock"


def headline_figures(figures: FigureReadings) -> dict[str, tuple[float, str]]:
    found = {}
    for group, name, label in HEADLINES:
        entry = figures.get(group, {}).get(name)
        value = None if entry is None else entry.get("value")
        if entry is not None and isinstance(value, (int, float)):
            found[label] = (float(value), sys.intern(str(entry.get("unit") or "")))  # one copy of each unit
    return found


def moment(created: str) -> dt.datetime:
    """When a certificate's run started, as `lockgen verify` writes it (`certificate_time`'s one rule: UTC,
    YYYY-MM-DDTHH:MM:SSZ, a real date); LockFormatError for any other text (a status lists that certificate under
    `refused`, by its node and file)."""
    found = created_moment(created)
    if found is None:
        raise LockFormatError(
            f"its time `{shown(created, 40)}` is not {CREATED_FORM}",
            "certificates are written by `lockgen verify`; use the original file",
        )
    return found


CLOCK_SKEW = dt.timedelta(minutes=5)  # how far ahead of this machine's clock a node's clock may run


def dated(created: str, now: dt.datetime) -> dt.datetime:
    """`moment`, of a certificate `now` can date: LockFormatError for one created more than CLOCK_SKEW after `now`
    (a node's clock wrong, or the time edited and signed), which would read "0 s ago" and stay its node's latest
    for ever: its age against this clock means nothing."""
    found = moment(created)
    if found - now > CLOCK_SKEW:
        raise LockFormatError(
            f"it was created {created}, after this machine's clock ({created_text(now)}) by more than "
            f"{CLOCK_SKEW.seconds // 60} min: it cannot be dated against this clock",
            "set the clocks of the node that made it and of this machine right (NTP), and certify the node again",
        )
    return found


def cause_evidence(stack: dict[str, Any]) -> dict[str, Any]:
    """Of a kernel's stack, what `numerics_votes.likely_cause` reads (the settings, the foreign libraries): a row keeps
    this, not the certificate, so a fleet's status holds a few hundred bytes a node."""
    libraries = stack.get("libraries")
    return {
        "settings": stack.get("settings") or {},
        "libraries": {"foreign": (libraries.get("foreign") if isinstance(libraries, dict) else None) or []},
    }


def status_rows(
    certificates: list[tuple[str, str, CertificateFacts]],
    now: dt.datetime,
    noise: float,
    refused: Mapping[str, int],
) -> list[StatusRow]:
    """Rows from (node, source, facts) triples, one per node and what it covers, sorted by node; each row keeps
    the headline figures, fingerprint and settings of its latest certificate, not the certificate, and how many of
    its node's certificates were `refused` (by node)."""
    if len(certificates) == 1:  # a node's one certificate (most nodes of a fleet): its row, nothing to group
        node, source, facts = certificates[0]
        return [_row(node, facts.covers, [(source, facts)], now, noise, refused.get(node, 0))]
    groups: dict[tuple[str, str], _Group] = {}
    for node, source, facts in certificates:
        groups.setdefault((node, facts.covers), _Group()).entries.append((source, facts))
    return [
        _row(node, covered, sorted(group.entries, key=lambda item: item[1].created), now, noise, refused.get(node, 0))
        for (node, covered), group in sorted(groups.items())
    ]


def _row(
    node: str, covered: str, ordered: list[tuple[str, CertificateFacts]], now: dt.datetime, noise: float, refused: int
) -> StatusRow:
    """The row of a node and what its certificates cover, from them oldest first. With `refused` certificates of its
    node it has not passed, whatever its latest accepted one says: a refused certificate has no time to be trusted
    (nor lock), so none can be judged older than the ones accepted, and any may be the node's latest."""
    source, latest = ordered[-1]
    regressions: tuple[str, ...] = ()
    if len(ordered) > 1:  # its figures against its previous certificate's (certify and what it imports, 20 ms of a
        from lockgen.core.certificate.certify import compare_figures  # status: for a node of several certificates)

        changes = compare_figures(ordered[-2][1].figures, latest.figures, noise)
        regressions = tuple(
            f"{c.name} {c.change_text()}" for c in changes if c.regression and not c.name.startswith("phases/")
        )
    return StatusRow(
        node=node,
        covers=sys.intern(covered),
        source=source,
        created=latest.created,
        age_s=max(0.0, (now - moment(latest.created)).total_seconds()),
        arch=sys.intern(latest.arch),
        passed=latest.passed and not refused,
        failed=latest.failed,
        figures=headline_figures(latest.figures),
        regressions=regressions,
        certificates=len(ordered),
        numerics=latest.numerics,
        stack=latest.stack,
        refused=refused,
    )


def refused_note(refused: int) -> str:
    """Why the row of a node with `refused` certificates has not passed (the text's rows and the page say it)."""
    return f"{refused} refused certificate{'s' if refused > 1 else ''} of this node, undated: may be its latest"


def age_text(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"
