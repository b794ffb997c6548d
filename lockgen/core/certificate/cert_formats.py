"""A certificate rendered for the tools fleets read, pure: Prometheus's text exposition (for node_exporter's
textfile collector), a Node Feature Discovery feature file, Node Problem Detector's one-line verdict, and a
JUnit XML report. Each is a function of the certificate body (NFD's also of how long its labels stay
valid); writing the text, atomically, is the caller's. prometheus-client builds the exposition; it is
imported only when one is rendered, so `lockgen verify` without `--emit prom` needs no more wheels.

Every string of a certificate reaches these formats cleaned: no control character ends a line early or
breaks XML, no lone surrogate breaks UTF-8; Prometheus label names are fixed, and a label value's characters a
terminal would not show are written as their escapes (`\\x1b`: still a valid value; the library escapes `\\`,
`"` and newlines), and the one NFD name taken from the certificate, its target, is made a Kubernetes label name.

A certificate judged against a pinned numerics reference (`cert export --expect-numerics`, `verify
--expect-numerics --emit`: a `numerics.ReferenceJudgement`) says so in each: its `numerics/expected_fingerprint`
check among the others (a failed JUnit testcase, the passed gauge 0, no NFD label), and apart, what each tool
can select on: Prometheus's `lockgen_numerics_reference_match` (1 or 0, the differing digests and the likely cause
as labels), NFD's `<target>.numerics=matches` while it passes (a comment naming the digests when it does not),
JUnit's `numerics.*` properties, NPD's line the outcome. A reference that pins no fingerprint of the certificate's
key (or a run that computed none) compared nothing: it fails the check too, but is said apart from other bits
(`lockgen_numerics_reference_unjudged` with its reason, not a match of 0; JUnit's `numerics.reference` "no
reference for this key"; NFD's comment and NPD's line say so).
"""

from __future__ import annotations

import datetime as dt
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lockgen.core.certificate.numerics import ReferenceJudgement
from lockgen.errors import LockFormatError, UserError
from lockgen.model.certificate import CertificateBody, Check
from lockgen.model.certificate_time import CREATED_FORM, created_moment, created_text
from lockgen.model.export_formats import EXPORT_FORMATS, NFD_VALID_FOR
from lockgen.model.names import UNSHOWABLE, escaped

NFD_NAMESPACE = "lockgen.io"
_IDENTITY_LABELS = ("target", "arch", "mode", "lock_sha256", "image_digest")
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")  # Kubernetes' label value rule
_NOT_IN_LABEL_NAME = re.compile(r"[^-A-Za-z0-9_.]")
_NFD_SUFFIX = ".arch"
_NFD_NUMERICS = ".numerics"


def _utf8(text: str) -> str:
    """`text` as UTF-8 can carry it: a lone surrogate (JSON's `\\ud800`) becomes `?`."""
    return text.encode("utf-8", "replace").decode("utf-8")


def _label_value(text: str) -> str:
    """`text` for a Prometheus label value: each character a terminal would not show as it is written as its escape
    (`names.escaped`: ESC as the four characters `\\x1b`), so a rendering printed to a terminal cannot drive it;
    a newline is left to the library, whose `\\n` is Prometheus's own escape. Still a valid label value, which
    Prometheus reads as those characters (a value that held a backslash and `x1b` reads the same)."""
    return "\n".join(escaped(line) for line in _utf8(text).split("\n"))


def _one_line(text: str) -> str:
    """`text` for a line of NFD's or NPD's: every character a person's terminal would not show as it is (controls,
    line separators, direction and zero-width marks: `names.UNSHOWABLE`) a space, so the line stays one and reads as
    written."""
    return UNSHOWABLE.sub(" ", _utf8(text))


def _xml(text: str) -> str:
    return _NOT_XML.sub("\ufffd", _utf8(text))


def _created_at(body: CertificateBody) -> dt.datetime:
    """When the certificate's run started (UTC), read by the one rule of `certificate_time` that the model and a
    fleet's status hold it to: every format reads it so (a body made in code is not validated by the model)."""
    found = created_moment(body.created)
    if found is None:
        raise LockFormatError(
            f"the certificate's time {_one_line(body.created)!r} is not {CREATED_FORM} (UTC, a real date and time)",
            "certificates are written by `lockgen verify`; use the original file",
        )
    return found


def _numeric_figures(body: CertificateBody) -> list[tuple[str, str, str, float]]:
    """(group, name, unit, value) of every figure that has a number, sorted; figures not run have none."""
    found = []
    for group, entries in sorted(body.figures.items()):
        for name, entry in sorted(entries.items()):
            if entry.value is not None:  # finite: the certificate model refuses any other number
                found.append((group, name, entry.unit, entry.value))
    return found


class _CertificateCollector:
    """The certificate as Prometheus gauges, every one labelled with what it certified (prometheus-client's
    collector protocol: a `collect()` yielding metric families)."""

    def __init__(self, body: CertificateBody, judgement: ReferenceJudgement | None) -> None:
        self._body = body
        self._judgement = judgement

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        body = self._body
        identity = [
            _label_value(value or "")
            for value in (
                body.subject.target,
                body.arch,
                body.mode,
                body.subject.lock_sha256,
                body.subject.image_digest,
            )
        ]
        passed = GaugeMetricFamily(
            "lockgen_certificate_passed",
            "1 when every check of the lockgen certificate passed, else 0",
            labels=_IDENTITY_LABELS,
        )
        passed.add_metric(identity, 1.0 if body.passed else 0.0)
        created = GaugeMetricFamily(
            "lockgen_certificate_timestamp_seconds",
            "When the certified lockgen verify run started, in seconds since the epoch",
            labels=_IDENTITY_LABELS,
        )
        created.add_metric(identity, _created_at(body).timestamp())
        duration = GaugeMetricFamily(
            "lockgen_certificate_duration_seconds",
            "How long the certified lockgen verify run took",
            labels=_IDENTITY_LABELS,
        )
        duration.add_metric(identity, body.duration_s)
        checks = GaugeMetricFamily(
            "lockgen_certificate_checks",
            "Checks of the lockgen certificate, by status",
            labels=(*_IDENTITY_LABELS, "status"),
        )
        failed = len(body.failures())
        checks.add_metric([*identity, "passed"], float(len(body.checks) - failed))
        checks.add_metric([*identity, "failed"], float(failed))
        figures = GaugeMetricFamily(
            "lockgen_figure",
            "A figure the lockgen certificate measured, in its unit",
            labels=(*_IDENTITY_LABELS, "group", "name", "unit"),
        )
        for group, name, unit, value in _numeric_figures(body):
            figures.add_metric([*identity, _label_value(group), _label_value(name), _label_value(unit)], value)
        yield from (passed, created, duration, checks, figures)
        judgement = self._judgement
        if judgement is not None and judgement.compared:
            match = GaugeMetricFamily(
                "lockgen_numerics_reference_match",
                "1 when the certificate's numerics fingerprint equals the pinned reference of its key, else 0 "
                "(differing: the digests that differ; cause: the likely cause)",
                labels=(*_IDENTITY_LABELS, "differing", "cause"),
            )
            match.add_metric(
                [*identity, _label_value(",".join(judgement.differing)), _label_value(judgement.cause)],
                1.0 if judgement.check.passed else 0.0,
            )
            yield match
        elif judgement is not None:  # nothing compared: a 0 beside real mismatches would read as other bits
            unjudged = GaugeMetricFamily(
                "lockgen_numerics_reference_unjudged",
                "1 when a numerics reference was pinned but not compared with the certificate's fingerprint (reason: "
                "no reference for this key, or no fingerprint); its numerics/expected_fingerprint check failed",
                labels=(*_IDENTITY_LABELS, "reason"),
            )
            unjudged.add_metric([*identity, _label_value(judgement.outcome)], 1.0)
            yield unjudged


def prometheus_text(body: CertificateBody, judgement: ReferenceJudgement | None = None) -> str:
    """The Prometheus text exposition of the certificate (node_exporter's textfile collector reads it).
    No sample carries a timestamp: the textfile collector refuses them; the run's time is a gauge."""
    from prometheus_client.exposition import generate_latest
    from prometheus_client.registry import CollectorRegistry

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_CertificateCollector(body, judgement))
    return generate_latest(registry).decode("utf-8")


def _nfd_expiry(body: CertificateBody, valid_for: dt.timedelta) -> dt.datetime:
    """When NFD stops reading the certificate's features: `valid_for` after its run; a date past the calendar's
    end (a run dated in the year 9999, a --valid-for of millennia) is refused."""
    created = _created_at(body)
    try:
        return created + valid_for
    except OverflowError:
        raise UserError(
            f"the node features would expire after the year 9999 (the certificate's run at {body.created}, valid "
            f"for {valid_for.days} days)",
            "certify again on a host whose clock is right, or pass a shorter --valid-for",
        ) from None


def _nfd_feature_name(body: CertificateBody) -> str:
    """The certificate's NFD feature name: its lock's target (or, when the target is not recorded, the
    arch), with the characters a Kubernetes label name cannot hold turned into `-`."""
    raw = _utf8(body.subject.target or body.arch)
    name = _NOT_IN_LABEL_NAME.sub("-", raw)[: 63 - len(_NFD_SUFFIX)].strip("-_.")
    if not name:
        raise UserError(
            f"target {_one_line(raw)!r} has no letter or digit a node label name can hold",
            "name the target with letters, digits, `-`, `_` or `.`",
        )
    return name


def nfd_features(
    body: CertificateBody, valid_for: dt.timedelta = NFD_VALID_FOR, judgement: ReferenceJudgement | None = None
) -> str:
    """A feature file for NFD's `local` source (features.d): while the certificate passed,
    `lockgen.io/<target>=<12 hex of the lock sha256>` and `lockgen.io/<target>.arch=<arch>`, expiring
    `valid_for` after the run. A failed certificate gives no label at all, so a selector on either never
    matches a node whose certificate failed; its comment names the failed checks."""
    lock = body.subject.lock_sha256
    if lock is None:
        raise UserError(
            "the certificate covers no lock, and a node feature names the lock the node was certified for",
            "certify with `lockgen verify --lock LOCK` (or --image of an image lockgen exported)",
        )
    if not _SHA256.fullmatch(lock):
        raise LockFormatError(
            "the certificate's lock sha256 is not 64 hex digits",
            "certificates are written by `lockgen verify`; use the original file",
        )
    if not _LABEL_VALUE.fullmatch(body.arch):
        raise LockFormatError(
            f"the certificate's arch {_one_line(body.arch)!r} is not a label value",
            "certificates are written by `lockgen verify`; use the original file",
        )
    name = _nfd_feature_name(body)
    expiry = _nfd_expiry(body, valid_for)
    lines = [
        f"# lockgen certificate: {name}, {body.arch} {_one_line(body.mode)}, run at {body.created}, "
        f"{'passed' if body.passed else 'FAILED'}",
        f"# +expiry-time={created_text(expiry)}",
    ]
    if body.passed:
        lines += [f"{NFD_NAMESPACE}/{name}={lock[:12]}", f"{NFD_NAMESPACE}/{name}{_NFD_SUFFIX}={body.arch}"]
        if judgement is not None:
            lines.append(
                f"{NFD_NAMESPACE}/{name[: 63 - len(_NFD_NUMERICS)].rstrip('-_.')}{_NFD_NUMERICS}=matches"
            )  # a name part holds 63 characters
    else:
        lines.append(f"# no labels: {_failed_names(body.failures())} failed")
        if judgement is not None and judgement.differing:
            lines.append(
                f"# numerics: {_one_line(', '.join(judgement.differing))} differ from the reference; likely "
                f"cause: {_one_line(judgement.cause)}"
            )
        elif judgement is not None and not judgement.compared:
            lines.append(f"# numerics: {judgement.outcome}: {_one_line(judgement.check.detail)}")
    return "\n".join(lines) + "\n"


def _failed_names(failures: list[Check]) -> str:
    return ", ".join(_one_line(f"{c.category}/{c.name}") for c in failures)


def _what(body: CertificateBody) -> str:
    return " ".join(_one_line(part) for part in (body.subject.target, body.arch) if part)


def npd_status(body: CertificateBody, judgement: ReferenceJudgement | None = None) -> str:
    """Node Problem Detector's message for the certificate, one line (NPD cuts it at `max_output_length`, so
    the failed checks' names come first and their details stay in the certificate); judged against a numerics
    reference that failed it, the outcome follows them (a mismatch, or no reference for this key)."""
    lock = f", lock {_one_line(body.subject.lock_sha256[:12])}" if body.subject.lock_sha256 else ""
    run = created_text(_created_at(body))
    if body.passed:
        return f"lockgen {_what(body)}: certificate passed {len(body.checks)} checks (run {run}{lock})"
    failures = body.failures()
    numerics = f" (numerics: {judgement.outcome})" if judgement is not None and not judgement.check.passed else ""
    return (
        f"lockgen {_what(body)}: certificate FAILED {len(failures)} of {len(body.checks)} checks: "
        f"{_failed_names(failures)}{numerics} (run {run}{lock})"
    )


def junit_report(body: CertificateBody, judgement: ReferenceJudgement | None = None) -> str:
    """JUnit XML: one testsuite for the certificate, one testcase per check (a failed check is a failure
    carrying its detail), and what the certificate covers and measured as the suite's properties."""
    failures = body.failures()
    root = ET.Element(
        "testsuites",
        name="lockgen verify",
        tests=str(len(body.checks)),
        failures=str(len(failures)),
        errors="0",
        time=f"{body.duration_s:.1f}",
    )
    suite = ET.SubElement(
        root,
        "testsuite",
        name=_xml(f"lockgen {_what(body)} ({body.mode})"),
        tests=str(len(body.checks)),
        failures=str(len(failures)),
        errors="0",
        skipped="0",
        time=f"{body.duration_s:.1f}",
        timestamp=_created_at(body).replace(tzinfo=None).isoformat(),  # xs:dateTime: a 4-digit year, no zone
    )
    properties = ET.SubElement(suite, "properties")
    covered = {
        "created": body.created,
        "tool": body.tool,
        "target": body.subject.target,
        "lock_sha256": body.subject.lock_sha256,
        "image_digest": body.subject.image_digest,
        "environment_digest": body.subject.environment_digest,
        "driver": body.hardware.driver,
        "gpus": ", ".join(body.hardware.gpu_names) or None,
    }
    if judgement is not None:
        covered |= {
            "numerics.reference": judgement.outcome,
            "numerics.differing": ", ".join(judgement.differing) or None,
            "numerics.cause": judgement.cause or None,
        }
    for key, value in covered.items():
        if value:
            ET.SubElement(properties, "property", name=key, value=_xml(value))
    for group, name, unit, figure in _numeric_figures(body):
        ET.SubElement(
            properties, "property", name=_xml(f"figure.{group}.{name}"), value=_xml(f"{figure} {unit}".strip())
        )
    for check in body.checks:
        case = ET.SubElement(
            suite, "testcase", classname=_xml(f"lockgen.{body.arch}.{check.category}"), name=_xml(check.name)
        )
        if not check.passed:
            failure = ET.SubElement(case, "failure", message=_xml(check.detail), type="lockgen check failed")
            failure.text = _xml(check.line())
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def render_certificate(
    body: CertificateBody,
    fmt: str,
    valid_for: dt.timedelta = NFD_VALID_FOR,
    judgement: ReferenceJudgement | None = None,
) -> str:
    """The certificate in format `fmt` (one of EXPORT_FORMATS), as the text to print or write; with `judgement`,
    `body` is the certificate judged against a numerics reference (`numerics.judged_certificate`)."""
    if fmt == "prom":
        return prometheus_text(body, judgement)
    if fmt == "nfd":
        return nfd_features(body, valid_for, judgement)
    if fmt == "npd":
        return npd_status(body, judgement) + "\n"
    if fmt == "junit":
        return junit_report(body, judgement)
    raise UserError(f"unknown format `{fmt}`", f"formats: {', '.join(EXPORT_FORMATS)}")


def rendering_notes(
    body: CertificateBody, fmt: str, out: Path | None, now: dt.datetime, valid_for: dt.timedelta = NFD_VALID_FOR
) -> list[str]:
    """What the reader of a rendering will do with it that its writer may not expect."""
    notes = []
    if fmt == "prom" and out is not None and out.suffix != ".prom":
        notes.append(f"node_exporter's textfile collector reads only *.prom files, not `{out.name}`")
    if fmt == "nfd" and _nfd_expiry(body, valid_for) <= now:
        notes.append(
            f"these node features expired at {created_text(_nfd_expiry(body, valid_for))} "
            f"(the certificate's run was at {body.created}): NFD ignores them; certify again, "
            "or pass a longer --valid-for"
        )
    return notes
