"""The formats fleets read, rendered from a certificate: Prometheus metrics for node_exporter's textfile
collector, NFD feature files, the Node Problem Detector plugin line and JUnit XML, on the committed H200
certificates (passed and degraded)."""

from __future__ import annotations

import datetime as dt
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from lockgen.api.certs import check_certificate
from lockgen.core.cert_formats import junit_report, nfd_features, npd_status, prometheus_text
from lockgen.errors import LockFormatError, UserError
from lockgen.model.certificate import CertificateBody, Check
from tests.conftest import REPO

H200 = REPO / "envs" / "examples" / "h200-system"
KEY = H200 / "h200-signing.pub"  # signed h200-lock-*, h200-full/quick and degraded-cudnn-*/graph-* certificates
PASSED = H200 / "h200-lock-full.cert.json"  # passed, bound to the h200 lock
IMAGE = H200 / "h200-lock-image.cert.json"  # passed, of an image: records its digest
CUDNN_OFF = H200 / "degraded-cudnn-off.cert.json"  # failed two convolution floors; signed by KEY
TF32_OFF = H200 / "degraded-tf32-off.cert.json"  # failed the TF32 floor; signed by another key than KEY
METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
NFD_LINE = re.compile(r"lockgen\.io/([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)=([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)")


def body_of(path: Path, key: Path | None = None) -> CertificateBody:
    return check_certificate(path, key, None).certificate


def raw_body(path: Path) -> dict:
    return json.loads(path.read_text())["certificate"]


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    """Every sample of a Prometheus exposition, by (name, labels), parsed as Prometheus' own client does."""
    found = {}
    for family in text_string_to_metric_families(text):
        assert METRIC_NAME.fullmatch(family.name), family.name
        for sample in family.samples:
            assert all(LABEL_NAME.fullmatch(label) and not label.startswith("__") for label in sample.labels)
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def identity(body: dict, **extra: str) -> frozenset:
    subject = body["subject"]
    return frozenset({"target": subject.get("target") or "", "arch": body["arch"], "mode": body["mode"],
                      "lock_sha256": subject.get("lock_sha256") or "", "image_digest": subject.get("image_digest") or "",
                      **extra}.items())


def numeric_figures(body: dict) -> dict[tuple[str, str], tuple[str, float]]:
    return {(group, name): (entry.get("unit", ""), entry["value"]) for group, entries in body["figures"].items()
            for name, entry in entries.items() if isinstance(entry.get("value"), (int, float))}


def failed(body: CertificateBody) -> CertificateBody:
    """The certificate as if its bf16 GEMM floor had failed (no committed certificate with a lock failed)."""
    checks = tuple(c.model_copy(update={"passed": False, "detail": "bf16 GEMM 402 TFLOP/s, floor 600"})
                   if c.name == "gemm_bf16_floor" else c for c in body.checks)
    assert checks != body.checks
    return body.model_copy(update={"checks": checks, "passed": False})


@pytest.mark.parametrize("path, key", [(PASSED, KEY), (IMAGE, KEY), (TF32_OFF, None), (CUDNN_OFF, KEY)])
def test_prometheus_metrics_carry_the_verdict_checks_and_every_figure(path: Path, key: Path | None) -> None:
    body = raw_body(path)
    found = samples(prometheus_text(body_of(path, key)))
    labels = identity(body)
    failures = sum(not c["passed"] for c in body["checks"])
    assert found[("lockgen_certificate_passed", labels)] == (1.0 if body["passed"] else 0.0)
    created = dt.datetime.strptime(body["created"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)
    assert found[("lockgen_certificate_timestamp_seconds", labels)] == created.timestamp()
    assert found[("lockgen_certificate_duration_seconds", labels)] == body["duration_s"]
    assert found[("lockgen_certificate_checks", labels | {("status", "failed")})] == failures
    assert found[("lockgen_certificate_checks", labels | {("status", "passed")})] == len(body["checks"]) - failures
    figures = {key_: value for key_, value in found.items() if key_[0] == "lockgen_figure"}
    expected = numeric_figures(body)
    assert len(figures) == len(expected) and expected
    for (group, name), (unit, value) in expected.items():
        assert figures[("lockgen_figure", labels | {("group", group), ("name", name), ("unit", unit)})] == value


def test_prometheus_labels_name_the_lock_and_image_and_are_escaped() -> None:
    image = raw_body(IMAGE)
    found = samples(prometheus_text(body_of(IMAGE, KEY)))
    passed = dict(next(labels for name, labels in found if name == "lockgen_certificate_passed"))
    assert passed["target"] == "h200" and passed["arch"] == "sm90" and passed["image_digest"].startswith("sha256:")
    assert passed["lock_sha256"] == image["subject"]["lock_sha256"] and len(passed["lock_sha256"]) == 64
    body = body_of(PASSED, KEY)
    odd = body.model_copy(update={"subject": body.subject.model_copy(update={"target": 'a "b" \\c\nd \ud800'})})
    labels = [dict(labels) for name, labels in samples(prometheus_text(odd)) if name == "lockgen_certificate_passed"]
    assert labels[0]["target"] == 'a "b" \\c\nd ?'  # escaped by the library and read back whole; a lone surrogate is `?`


def test_nfd_labels_the_lock_while_the_certificate_passed() -> None:
    body = body_of(PASSED, KEY)
    lines = nfd_features(body).splitlines()
    assert lines == ["# lockgen certificate: h200, sm90 full, run at 2026-12-01T11:20:57Z, passed",
                     "# +expiry-time=2026-12-08T11:20:57Z",
                     f"lockgen.io/h200={body.subject.lock_sha256[:12]}", "lockgen.io/h200.arch=sm90"]
    assert all(NFD_LINE.fullmatch(line) for line in lines if not line.startswith("#"))
    assert "# +expiry-time=2026-12-01T23:20:57Z" in nfd_features(body, dt.timedelta(hours=12)).splitlines()
    failing = nfd_features(failed(body)).splitlines()
    assert [line for line in failing if not line.startswith("#")] == []  # no label matches a failed node
    assert failing[-1] == "# no labels: performance/gemm_bf16_floor failed" and "FAILED" in failing[0]


def test_nfd_names_are_label_names_and_a_certificate_without_lock_is_refused() -> None:
    body = body_of(PASSED, KEY)
    renamed = body.model_copy(update={"subject": body.subject.model_copy(update={"target": "gh200 (arm)/x" + "y" * 80})})
    labels = [line for line in nfd_features(renamed).splitlines() if not line.startswith("#")]
    assert labels[0].startswith("lockgen.io/gh200--arm--xyyy") and all(NFD_LINE.fullmatch(line) for line in labels)
    assert len(labels[1].split("=")[0].split("/")[1]) <= 63
    unnamed = body.model_copy(update={"subject": body.subject.model_copy(update={"target": "ü!"})})
    with pytest.raises(UserError, match="no letter or digit"):
        nfd_features(unnamed)
    with pytest.raises(UserError, match="covers no lock"):
        nfd_features(body_of(TF32_OFF))
    forged = body.model_copy(update={"subject": body.subject.model_copy(update={"lock_sha256": "15f25bda0af4=x\nevil"})})
    with pytest.raises(LockFormatError, match="not 64 hex digits"):
        nfd_features(forged)


def test_npd_status_is_one_line_naming_the_failed_checks() -> None:
    ok = npd_status(body_of(PASSED, KEY))
    assert ok == "lockgen h200 sm90: certificate passed 42 checks (run 2026-12-01T11:20:57Z, lock 15f25bda0af4)"
    problem = npd_status(body_of(CUDNN_OFF, KEY))
    assert problem.startswith("lockgen sm90: certificate FAILED 2 of 34 checks: performance/conv_bf16_floor, "
                              "performance/conv_fp16_floor")
    body = failed(body_of(PASSED, KEY))
    odd = body.model_copy(update={"checks": tuple(c.model_copy(update={"name": "x\ny"}) if not c.passed else c
                                                  for c in body.checks)})
    assert "\n" not in npd_status(odd) and "performance/x y" in npd_status(odd)


@pytest.mark.parametrize("path, key", [(PASSED, KEY), (TF32_OFF, None)])
def test_junit_has_one_testcase_per_check_and_the_failures_with_their_detail(path: Path, key: Path | None) -> None:
    body = raw_body(path)
    root = ET.fromstring(junit_report(body_of(path, key)))
    assert root.tag == "testsuites" and [child.tag for child in root] == ["testsuite"]
    suite = root[0]
    cases = suite.findall("testcase")
    failures = [c for c in body["checks"] if not c["passed"]]
    assert len(cases) == len(body["checks"]) == int(suite.get("tests"))
    assert int(suite.get("failures")) == len(failures) == len(suite.findall("testcase/failure"))
    assert [(c.get("classname"), c.get("name")) for c in cases] == \
        [(f"lockgen.sm90.{c['category']}", c["name"]) for c in body["checks"]]
    for check in failures:
        case = next(c for c in cases if c.get("name") == check["name"])
        assert case.find("failure").get("message") == check["detail"]
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["created"] == body["created"] and properties["figure.gemm.tf32"].endswith(" TFLOP/s")
    assert properties.get("lock_sha256") == body["subject"].get("lock_sha256")


@settings(max_examples=40, deadline=None)
@given(detail=st.text(max_size=40), name=st.text(min_size=1, max_size=12))
def test_junit_stays_xml_whatever_a_check_says(detail: str, name: str) -> None:
    body = body_of(PASSED, KEY)
    odd = body.model_copy(update={"passed": False, "checks": (Check(category="stack", name=name, passed=False,
                                                                       detail=detail),)})
    failure = ET.fromstring(junit_report(odd)).find("testsuite/testcase/failure")
    if all(ch in "\t\n\r" or (" " <= ch <= "\ud7ff") or ("\ue000" <= ch <= "\ufffd") or ch >= "\U00010000"
           for ch in detail):
        assert failure.get("message") == detail  # every character XML can hold comes back as it was
    else:
        assert "\ufffd" in failure.get("message")
