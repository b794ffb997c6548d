"""The formats fleets read (`lockgen cert export`, `lockgen verify --emit`): Prometheus metrics for
node_exporter's textfile collector, NFD feature files, the Node Problem Detector plugin contract and JUnit
XML, on the committed H200 certificates (passed and degraded); damaged certificates through the command
(hypothesis); a real node_exporter scraped over HTTP; and `verify --arch cpu --quick --emit`."""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from lockgen.adapters.node.signing import render as canonical
from lockgen.api.certs import check_certificate
from lockgen.cli.app import app
from lockgen.core.certificate.cert_formats import junit_report, nfd_features, npd_status, prometheus_text
from lockgen.errors import LockFormatError, UserError
from lockgen.model.certificate import CertificateBody, Check
from tests.conftest import REPO, run_cli

H200 = REPO / "envs" / "examples" / "h200-system"
KEY = H200 / "h200-signing.pub"  # signed h200-lock-*, h200-full/quick and degraded-cudnn-*/graph-* certificates
PASSED = H200 / "h200-lock-full.cert.json"  # passed, bound to the h200 lock
IMAGE = H200 / "h200-lock-image.cert.json"  # passed, of an image: records its digest
CUDNN_OFF = H200 / "degraded-cudnn-off.cert.json"  # failed two convolution floors; signed by KEY
TF32_OFF = H200 / "degraded-tf32-off.cert.json"  # failed the TF32 floor; signed by another key than KEY
METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
NFD_LINE = re.compile(
    r"lockgen\.io/([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)=([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)"
)


def body_of(path: Path, key: Path | None = None) -> CertificateBody:
    return check_certificate(path, [key] if key else [], None).certificate


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
    return frozenset(
        {
            "target": subject.get("target") or "",
            "arch": body["arch"],
            "mode": body["mode"],
            "lock_sha256": subject.get("lock_sha256") or "",
            "image_digest": subject.get("image_digest") or "",
            **extra,
        }.items()
    )


def numeric_figures(body: dict) -> dict[tuple[str, str], tuple[str, float]]:
    return {
        (group, name): (entry.get("unit", ""), entry["value"])
        for group, entries in body["figures"].items()
        for name, entry in entries.items()
        if isinstance(entry.get("value"), (int, float))
    }


def failed(body: CertificateBody) -> CertificateBody:
    """The certificate as if its bf16 GEMM floor had failed (no committed certificate with a lock failed)."""
    checks = tuple(
        c.model_copy(update={"passed": False, "detail": "bf16 GEMM 402 TFLOP/s, floor 600"})
        if c.name == "gemm_bf16_floor"
        else c
        for c in body.checks
    )
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
    assert (
        labels[0]["target"] == 'a "b" \\c\nd ?'
    )  # escaped by the library and read back whole; a lone surrogate is `?`


def test_nfd_labels_the_lock_while_the_certificate_passed() -> None:
    body = body_of(PASSED, KEY)
    lines = nfd_features(body).splitlines()
    assert lines == [
        "# lockgen certificate: h200, sm90 full, run at 2026-12-01T11:20:57Z, passed",
        "# +expiry-time=2026-12-08T11:20:57Z",
        f"lockgen.io/h200={body.subject.lock_sha256[:12]}",
        "lockgen.io/h200.arch=sm90",
    ]
    assert all(NFD_LINE.fullmatch(line) for line in lines if not line.startswith("#"))
    assert "# +expiry-time=2026-12-01T23:20:57Z" in nfd_features(body, dt.timedelta(hours=12)).splitlines()
    failing = nfd_features(failed(body)).splitlines()
    assert [line for line in failing if not line.startswith("#")] == []  # no label matches a failed node
    assert failing[-1] == "# no labels: performance/gemm_bf16_floor failed" and "FAILED" in failing[0]


def test_nfd_names_are_label_names_and_a_certificate_without_lock_is_refused() -> None:
    body = body_of(PASSED, KEY)
    renamed = body.model_copy(
        update={"subject": body.subject.model_copy(update={"target": "gh200 (arm)/x" + "y" * 80})}
    )
    labels = [line for line in nfd_features(renamed).splitlines() if not line.startswith("#")]
    assert labels[0].startswith("lockgen.io/gh200--arm--xyyy") and all(NFD_LINE.fullmatch(line) for line in labels)
    assert len(labels[1].split("=")[0].split("/")[1]) <= 63
    unnamed = body.model_copy(update={"subject": body.subject.model_copy(update={"target": "ü!"})})
    with pytest.raises(UserError, match="no letter or digit"):
        nfd_features(unnamed)
    with pytest.raises(UserError, match="covers no lock"):
        nfd_features(body_of(TF32_OFF))
    forged = body.model_copy(
        update={"subject": body.subject.model_copy(update={"lock_sha256": "15f25bda0af4=x\nevil"})}
    )
    with pytest.raises(LockFormatError, match="not 64 hex digits"):
        nfd_features(forged)


def test_npd_status_is_one_line_naming_the_failed_checks() -> None:
    ok = npd_status(body_of(PASSED, KEY))
    assert ok == "lockgen h200 sm90: certificate passed 42 checks (run 2026-12-01T11:20:57Z, lock 15f25bda0af4)"
    problem = npd_status(body_of(CUDNN_OFF, KEY))
    assert problem.startswith(
        "lockgen sm90: certificate FAILED 2 of 34 checks: performance/conv_bf16_floor, performance/conv_fp16_floor"
    )
    body = failed(body_of(PASSED, KEY))
    odd = body.model_copy(
        update={"checks": tuple(c.model_copy(update={"name": "x\ny"}) if not c.passed else c for c in body.checks)}
    )
    assert "\n" not in npd_status(odd) and "performance/x y" in npd_status(odd)
    forged = body_of(PASSED, KEY).model_copy(deep=True)  # the subject's lock as the attack battery forged it
    forged = forged.model_copy(update={"subject": forged.subject.model_copy(update={"lock_sha256": "../\nx=1"})})
    assert "\n" not in npd_status(forged) and "lock ../ x=1" in npd_status(forged)


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
    assert [(c.get("classname"), c.get("name")) for c in cases] == [
        (f"lockgen.sm90.{c['category']}", c["name"]) for c in body["checks"]
    ]
    for check in failures:
        case = next(c for c in cases if c.get("name") == check["name"])
        assert case.find("failure").get("message") == check["detail"]
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["created"] == body["created"] and properties["figure.gemm.tf32"].endswith(" TFLOP/s")
    assert properties.get("lock_sha256") == body["subject"].get("lock_sha256")


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(detail=st.text(max_size=40), name=st.text(min_size=1, max_size=12))
def test_junit_stays_xml_whatever_a_check_says(detail: str, name: str) -> None:
    body = body_of(PASSED, KEY)
    odd = body.model_copy(
        update={"passed": False, "checks": (Check(category="stack", name=name, passed=False, detail=detail),)}
    )
    failure = ET.fromstring(junit_report(odd)).find("testsuite/testcase/failure")
    if all(
        ch in "\t\n\r" or (" " <= ch <= "\ud7ff") or ("\ue000" <= ch <= "\ufffd") or ch >= "\U00010000" for ch in detail
    ):
        assert failure.get("message") == detail  # every character XML can hold comes back as it was
    else:
        assert "\ufffd" in failure.get("message")


def _fails_cleanly(result: subprocess.CompletedProcess[str], code: int = 1) -> None:
    lines = result.stderr.splitlines()
    assert result.returncode == code, result.stderr
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: "), result.stderr


@pytest.mark.slow
def test_cert_export_writes_each_format_atomically_and_npd_exits_with_the_verdict(tmp_path: Path) -> None:
    for fmt, check in (("prom", samples), ("junit", ET.fromstring), ("nfd", str.splitlines)):
        out = tmp_path / f"lockgen.{fmt}"
        result = run_cli("cert", "export", str(PASSED), "--format", fmt, "--key", str(KEY), "--out", str(out))
        assert result.returncode == 0 and result.stdout == f"{out}\n" and result.stderr == "", result.stderr
        assert check(out.read_text())
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "lockgen.junit",
        "lockgen.nfd",
        "lockgen.prom",
    ]  # no temp file
    ok = run_cli("cert", "export", str(PASSED), "--format", "npd", "--key", str(KEY))
    assert (ok.returncode, ok.stdout.count("\n"), ok.stderr) == (0, 1, "") and "passed 42 checks" in ok.stdout
    problem = run_cli("cert", "export", str(CUDNN_OFF), "--format", "npd", "--key", str(KEY))
    assert (problem.returncode, problem.stdout.count("\n")) == (1, 1) and "conv_bf16_floor" in problem.stdout
    unproven = run_cli("cert", "export", str(TF32_OFF), "--format", "junit")  # signed, no --key: as `cert verify`
    _fails_cleanly(unproven)
    assert "but no --key was given" in unproven.stderr and unproven.stdout == ""
    note = run_cli(
        "cert", "export", str(PASSED), "--format", "prom", "--key", str(KEY), "--out", str(tmp_path / "metrics.txt")
    )
    assert note.returncode == 0 and "reads only *.prom files" in note.stderr


@pytest.mark.slow
def test_cert_export_refuses_a_wrong_key_bad_input_and_bad_flags(tmp_path: Path) -> None:
    out = tmp_path / "lockgen.prom"
    out.write_text("old\n")
    _fails_cleanly(run_cli("cert", "export", str(TF32_OFF), "--format", "prom", "--key", str(KEY), "--out", str(out)))
    no_lock = run_cli("cert", "export", str(H200 / "h200-full.cert.json"), "--format", "nfd", "--key", str(KEY))
    _fails_cleanly(no_lock)
    assert "covers no lock" in no_lock.stderr
    _fails_cleanly(run_cli("cert", "export", str(tmp_path / "missing.cert.json"), "--format", "npd"))
    for flags in (
        ["--format", "xml"],
        ["--format", "npd", "--out", str(out)],
        ["--format", "prom", "--valid-for", "7d"],
        ["--format", "nfd", "--valid-for", "seven days"],
    ):
        _fails_cleanly(run_cli("cert", "export", str(PASSED), *flags), code=2)
    assert out.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["lockgen.prom"]
    latin1 = tmp_path / "latin1.cert.json"  # not UTF-8: was a UnicodeDecodeError (exit 3) in `cert verify` too
    latin1.write_bytes(PASSED.read_bytes().replace(b'"h200"', b'"h\xe9200"', 1))
    for command in (["cert", "verify", str(latin1)], ["cert", "export", str(latin1), "--format", "npd"]):
        _fails_cleanly(run_cli(*command))


RENDERED_FIELDS = [
    ("subject", "target"),
    ("subject", "lock_sha256"),
    ("subject", "image_digest"),
    ("arch",),
    ("mode",),
    ("created",),
    ("duration_s",),
    ("passed",),
    ("figures",),
    ("figures", "gemm"),
    ("figures", "gemm", "bf16"),
    ("figures", "gemm", "bf16", "value"),
    ("figures", "gemm", "bf16", "unit"),
    ("checks",),
    ("checks", 0),
    ("checks", 0, "name"),
    ("checks", 0, "detail"),
    ("checks", 0, "passed"),
]
ANY_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**400), max_value=10**400)
    | st.floats()
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=4), inner, max_size=2),
    max_leaves=4,
)


def _damaged(data: st.DataObject) -> bytes:
    """Either bytes cut or replaced anywhere (UTF-8 or not), or one field the renderings read given any JSON
    value and the file rendered canonically again (its byte check then passes, so the model and the renderers
    are what is tested)."""
    raw = PASSED.read_bytes()
    if data.draw(st.booleans()):
        start = data.draw(st.integers(0, len(raw) - 1))
        return raw[:start] + data.draw(st.binary(max_size=8)) + raw[start + data.draw(st.integers(0, 40)) :]
    document = json.loads(raw)
    document["signature"] = None
    *parents, last = data.draw(st.sampled_from(RENDERED_FIELDS))
    node = document["certificate"]
    for part in parents:
        node = node[part]
    node[last] = data.draw(ANY_JSON)
    return canonical(document).encode("utf-8")


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(data=st.data(), fmt=st.sampled_from(["prom", "nfd", "npd", "junit"]), keyed=st.booleans())
def test_a_damaged_certificate_through_cert_export(data: st.DataObject, fmt: str, keyed: bool) -> None:
    """It renders something its reader parses, or fails with one `error:` and one `hint:` line, exit 1, and the
    previous rendering stays as it was. Never a traceback (exit 3)."""
    with tempfile.TemporaryDirectory() as folder:
        damaged = Path(folder) / "damaged.cert.json"
        damaged.write_bytes(_damaged(data))
        out = Path(folder) / "out" / f"lockgen.{fmt}"
        out.parent.mkdir()
        out.write_text("previous\n")
        args = ["cert", "export", str(damaged), "--format", fmt] + (["--key", str(KEY)] if keyed else [])
        result = CliRunner().invoke(app, args + ([] if fmt == "npd" else ["--out", str(out)]))
        event(f"exit {result.exit_code}")
        if result.exit_code == 0 or (fmt == "npd" and result.exit_code == 1 and not result.stderr):
            rendered = result.stdout if fmt == "npd" else out.read_text()
            parse = {
                "prom": samples,
                "junit": ET.fromstring,
                "npd": lambda t: t.count("\n") == 1,
                "nfd": lambda t: all(NFD_LINE.fullmatch(line) for line in t.splitlines() if not line.startswith("#")),
            }
            assert parse[fmt](rendered), rendered
            return
        lines = result.stderr.splitlines()
        assert result.exit_code == 1, (result.exit_code, result.stderr, result.exception)
        assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: "), result.stderr
        assert out.read_text() == "previous\n" and [p.name for p in out.parent.iterdir()] == [out.name]


def _scraped_by_node_exporter(binary: str, textfiles: Path) -> dict[tuple[str, frozenset], float]:
    """The samples node_exporter's textfile collector serves for the files in `textfiles` (on loopback)."""
    port = _free_port()
    exporter = subprocess.Popen(
        [
            binary,
            f"--web.listen-address=127.0.0.1:{port}",
            "--collector.disable-defaults",
            "--collector.textfile",
            f"--collector.textfile.directory={textfiles}",
            "--web.disable-exporter-metrics",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        return samples(_scrape(exporter, f"http://127.0.0.1:{port}/metrics"))
    finally:
        exporter.terminate()
        try:
            exporter.wait(timeout=10)
        except subprocess.TimeoutExpired:
            exporter.kill()
            exporter.wait(timeout=10)
        assert exporter.stderr is not None
        exporter.stderr.close()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _scrape(exporter: subprocess.Popen, url: str) -> str:
    """/metrics once the exporter answers: at most 100 tries 0.1 s apart, each with a 2 s timeout."""
    for _ in range(100):
        assert exporter.poll() is None, f"node_exporter exited {exporter.returncode}: {exporter.stderr.read()[-2000:]}"
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return response.read().decode("utf-8")
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.1)
    raise AssertionError(f"node_exporter did not answer on {url} within about 10 s")


@pytest.mark.slow
def test_node_exporter_serves_the_exported_metrics(tmp_path: Path) -> None:
    """Debian's prometheus-node-exporter reads the textfile directory the way fleets deploy it: the metrics of
    two certificates (a passed image certificate, a degraded one, both signed by KEY) come back with their values
    and labels."""
    binary = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
    assert binary, "node_exporter is missing: apt-get install -y prometheus-node-exporter (.ci/run does)"
    textfiles = tmp_path / "textfile"
    for name, path in (("image", IMAGE), ("cudnn", CUDNN_OFF)):
        exported = run_cli(
            "cert", "export", str(path), "--format", "prom", "--key", str(KEY), "--out", str(textfiles / f"{name}.prom")
        )
        assert exported.returncode == 0, exported.stderr
    scraped = _scraped_by_node_exporter(binary, textfiles)
    assert scraped[("node_textfile_scrape_error", frozenset())] == 0  # node_exporter read both files without error
    image, degraded = raw_body(IMAGE), raw_body(CUDNN_OFF)
    assert scraped[("lockgen_certificate_passed", identity(image))] == 1
    assert scraped[("lockgen_certificate_passed", identity(degraded))] == 0
    assert scraped[("lockgen_certificate_checks", identity(degraded, status="failed"))] == 2
    bf16 = image["figures"]["gemm"]["bf16"]
    assert scraped[("lockgen_figure", identity(image, group="gemm", name="bf16", unit="TFLOP/s"))] == bf16["value"]
    assert (
        scraped[("lockgen_figure", identity(degraded, group="gemm", name="tf32", unit="TFLOP/s"))]
        == degraded["figures"]["gemm"]["tf32"]["value"]
    )
    assert sum(name == "lockgen_figure" for name, _ in scraped) == len(numeric_figures(image)) + len(
        numeric_figures(degraded)
    )


@pytest.mark.slow
def test_verify_emit_refuses_npd_unknown_formats_and_nfd_without_a_lock(tmp_path: Path) -> None:
    out = tmp_path / "c.cert.json"
    for emit, code in (
        ("npd=x", 2),
        ("metrics.prom", 2),
        ("xml=r.xml", 2),
        (f"prom={out}", 2),
        (f"nfd={tmp_path / 'lockgen'}", 1),
    ):
        _fails_cleanly(run_cli("verify", "--arch", "cpu", "--quick", "--out", str(out), "--emit", emit), code=code)
    assert list(tmp_path.iterdir()) == []  # refused before the kernel ran: no certificate, no rendering


@pytest.mark.slow
def test_verify_emits_its_certificate_for_node_exporter_and_ci(tmp_path: Path) -> None:
    out, prom, junit = tmp_path / "c.cert.json", tmp_path / "metrics" / "lockgen.prom", tmp_path / "report.xml"
    result = run_cli(
        "verify", "--arch", "cpu", "--quick", "--out", str(out), "--emit", f"prom={prom}", "--emit", f"junit={junit}"
    )
    assert result.returncode == 0 and result.stdout == f"{out}\n", result.stderr
    assert f"wrote prom {prom}" in result.stderr and f"wrote junit {junit}" in result.stderr
    body = raw_body(out)
    found = samples(prom.read_text())
    assert found[("lockgen_certificate_passed", identity(body))] == 1 and body["arch"] == "cpu"
    assert (
        found[("lockgen_figure", identity(body, group="gemm", name="fp32", unit="TFLOP/s"))]
        == body["figures"]["gemm"]["fp32"]["value"]
    )
    suite = ET.fromstring(junit.read_text()).find("testsuite")
    assert int(suite.get("tests")) == len(body["checks"]) and suite.get("failures") == "0"
    assert sorted(p.name for p in prom.parent.iterdir()) == ["lockgen.prom"]


def test_a_rendering_that_fails_once_checked_says_what_was_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every `--emit` file is checked before the run; one whose write fails even so (the disk filled meanwhile)
    names the files written: before, the error said `nothing half done is kept` with the certificate and the
    renderings before it written."""
    import errno

    from lockgen.api import verify as api

    certificate, prom, junit = tmp_path / "c.cert.json", tmp_path / "p.prom", tmp_path / "r.xml"
    written = api.write_atomic

    def full_at_junit(path: Path, text: str) -> None:
        if path == junit:
            raise OSError(errno.ENOSPC, "No space left on device")
        written(path, text)

    monkeypatch.setattr(api, "write_atomic", full_at_junit)
    options = api.VerifyOptions(arch="sm90", emit=(("prom", prom), ("junit", junit)))
    with pytest.raises(UserError) as refused:
        api._emit(body_of(PASSED, KEY), certificate, options, (), lambda line: None)
    assert refused.value.message == (
        f"--emit junit={junit} was not written (No space left on device); written: the certificate {certificate}, "
        f"prom {prom}"
    )
    assert f"lockgen cert export {certificate} --format junit --out FILE" in refused.value.hint
    assert sorted(path.name for path in tmp_path.iterdir()) == ["p.prom"]


@pytest.mark.parametrize("valid_for", [dt.timedelta(hours=12), dt.timedelta(days=14), dt.timedelta(minutes=90)])
def test_the_command_a_failed_rendering_suggests_renders_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, valid_for: dt.timedelta
) -> None:
    """A signed run's `--emit nfd=FILE --valid-for 12h` whose write fails suggests a `cert export` that renders the
    same file: before, it named neither the signer's public key (a signed certificate is refused without one) nor
    the lifetime (the features would have expired after 7 days, not 12 hours)."""
    import errno

    from lockgen.adapters.node.signing import keygen, signed_file
    from lockgen.api import verify as api
    from lockgen.core.certificate.cert_formats import render_certificate

    key, _ = keygen(tmp_path / "signing")
    certificate, features = tmp_path / "c.cert.json", tmp_path / "features.txt"
    body = body_of(PASSED, KEY)
    certificate.write_text(signed_file(body.model_dump(mode="json", by_alias=True), key))

    def full(path: Path, text: str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(api, "write_atomic", full)
    options = api.VerifyOptions(arch="sm90", key=key, emit=(("nfd", features),), valid_for=valid_for)
    with pytest.raises(UserError) as refused:
        api._emit(body, certificate, options, (), lambda line: None)
    command = refused.value.hint.split("from the certificate: ")[1]
    assert command.startswith(f"lockgen cert export {certificate} --format nfd --out FILE --key {key}.pub --valid-for")
    done = CliRunner().invoke(app, command.replace("FILE", str(features)).split()[1:])
    assert done.exit_code == 0, done.output
    assert features.read_text() == render_certificate(body, "nfd", valid_for)
    with_references = api.VerifyOptions(arch="sm90", emit=(("prom", features),), expect_numerics=tmp_path / "ref.json")
    with pytest.raises(UserError) as refused:
        api._emit(body, certificate, with_references, (), lambda line: None)
    assert refused.value.hint.endswith(f"--format prom --out FILE --expect-numerics {tmp_path / 'ref.json'}")


@given(count=st.integers(1, 999_999), unit=st.sampled_from("mhdw"))
def test_a_lifetime_written_back_reads_as_the_same_lifetime(count: int, unit: str) -> None:
    """The `--valid-for` a suggested command carries is read by `cert export` as the lifetime the run was given."""
    from lockgen.cli.cert_export_cmd import parse_valid_for
    from lockgen.model.export_formats import valid_for_text

    given = parse_valid_for(f"{count}{unit}")
    written = valid_for_text(given)
    assert parse_valid_for(written) == given and len(written) <= len(f"{count}{unit}")


NUMERICS = REPO / "envs" / "examples" / "numerics-fingerprint"
NUMERICS_KEY = NUMERICS / "numerics-signing.pub"
DIGESTS = ("adamw_bf16", "conv_bf16", "gemm_bf16", "gemm_fp16", "gemm_fp32", "gemm_fp8", "gemm_tf32")


def _fingerprinted() -> CertificateBody:
    """The passed H200 lock certificate carrying the H100 evidence's fingerprint (none of the committed certificates
    has both a lock, which NFD needs, and a fingerprint)."""
    return body_of(PASSED, KEY).model_copy(
        update={"numerics": body_of(NUMERICS / "node1-quick.cert.json", NUMERICS_KEY).numerics}
    )


@settings(max_examples=40, deadline=None)
@given(digest=st.sampled_from(DIGESTS), tf32_off=st.booleans())
def test_a_pinned_reference_judges_each_certificate_alone_in_every_format(digest: str, tf32_off: bool) -> None:
    """A certificate one digest off the reference of its key fails in each format, read back by each format's own
    parser: Prometheus (the passed gauge 0, `lockgen_numerics_reference_match` 0 naming the digest and the cause),
    JUnit (a failed numerics/expected_fingerprint testcase naming both), NFD (no label, a comment naming the digest);
    the reference itself passes everywhere (match 1, the `.numerics=matches` label)."""
    from lockgen.core.certificate.numerics import NumericsReference, judged_certificate

    good = _fingerprinted()
    assert good.numerics is not None
    stack = {**good.stack, "settings": {"NVIDIA_TF32_OVERRIDE": "0"}} if tf32_off else good.stack
    odd = good.model_copy(
        update={
            "numerics": good.numerics.model_copy(update={"digests": {**good.numerics.digests, digest: "f" * 64}}),
            "stack": stack,
        }
    )
    reference = (NumericsReference(good.numerics, good.stack, "`good.cert.json`"),)
    judged, judgement = judged_certificate(odd, reference)
    assert not judged.passed and judgement.differing == (digest,)
    cause = "NVIDIA_TF32_OVERRIDE=0 here" if tf32_off else "the hardware"
    metrics = samples(prometheus_text(judged, judgement))
    body = judged.model_dump(mode="json")
    assert metrics[("lockgen_certificate_passed", identity(body))] == 0
    [(labels, value)] = [
        (dict(labels), value) for (name, labels), value in metrics.items() if name == "lockgen_numerics_reference_match"
    ]
    assert value == 0 and labels["differing"] == digest and cause in labels["cause"]
    suite = ET.fromstring(junit_report(judged, judgement)).find("testsuite")
    [case] = [case for case in suite.iter("testcase") if case.get("name") == "expected_fingerprint"]
    assert (
        case.get("classname").endswith(".numerics")
        and f"digest {digest} differs from the reference" in case.find("failure").get("message")
        and cause in case.find("failure").get("message")
    )
    assert {p.get("name"): p.get("value") for p in suite.iter("property")}["numerics.differing"] == digest
    features = nfd_features(judged, dt.timedelta(days=3650), judgement).splitlines()
    assert not [line for line in features if NFD_LINE.fullmatch(line)] and any(
        line.startswith("# numerics: " + digest) for line in features
    )
    same, judgement = judged_certificate(good, reference)
    assert same.passed and judgement.check.passed
    assert dict(
        next(
            labels
            for (name, labels), _ in samples(prometheus_text(same, judgement)).items()
            if name == "lockgen_numerics_reference_match"
        )
    ) == dict(identity(body)) | {
        "differing": "",
        "cause": "",
    }
    labels = [
        line for line in nfd_features(same, dt.timedelta(days=3650), judgement).splitlines() if NFD_LINE.fullmatch(line)
    ]
    assert labels[-1] == "lockgen.io/h200.numerics=matches" and len(labels) == 3


@pytest.mark.slow
def test_cert_export_judges_against_a_pinned_reference_and_node_exporter_reads_it(tmp_path: Path) -> None:
    """`cert export --expect-numerics GOOD`: the TF32-off node of the H100 evidence fails (npd exits 1 naming the
    check), its metrics, read back by node_exporter's textfile collector, say which digest and the setting; a
    reference of another key fails it too, saying so; a healthy node matches."""
    good, odd = NUMERICS / "node1-quick.cert.json", NUMERICS / "node4-tf32-off.cert.json"
    npd = run_cli(
        "cert",
        "export",
        str(NUMERICS / "node2-quick.cert.json"),
        "--format",
        "npd",
        "--key",
        str(NUMERICS_KEY),
        "--expect-numerics",
        str(good),
    )
    assert npd.returncode == 0 and "passed" in npd.stdout, npd.stdout + npd.stderr
    npd = run_cli(
        "cert", "export", str(odd), "--format", "npd", "--key", str(NUMERICS_KEY), "--expect-numerics", str(good)
    )
    assert npd.returncode == 1 and "numerics/expected_fingerprint" in npd.stdout
    other_key = tmp_path / "other-key.json"
    numerics = raw_body(good)["numerics"]
    other_key.write_text(json.dumps({**numerics, "key": {**numerics["key"], "driver": "575.57.08"}}))
    junit = run_cli(
        "cert",
        "export",
        str(good),
        "--format",
        "junit",
        "--key",
        str(NUMERICS_KEY),
        "--expect-numerics",
        str(other_key),
    )
    [case] = [
        case for case in ET.fromstring(junit.stdout).iter("testcase") if case.get("name") == "expected_fingerprint"
    ]
    assert junit.returncode == 0 and "driver: 575.57.08 vs 580.159.04" in case.find("failure").get("message")
    bad = run_cli("cert", "export", str(good), "--format", "prom", "--expect-numerics", str(tmp_path / "missing.json"))
    assert (
        bad.returncode == 1
        and bad.stderr.startswith("error:")
        and "hint:" in bad.stderr
        and "Traceback" not in bad.stderr
    )
    binary = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
    assert binary, "node_exporter is missing: apt-get install -y prometheus-node-exporter (.ci/run does)"
    textfiles = tmp_path / "textfile"
    for name, path in (("good", NUMERICS / "node2-quick.cert.json"), ("odd", odd)):
        exported = run_cli(
            "cert",
            "export",
            str(path),
            "--format",
            "prom",
            "--key",
            str(NUMERICS_KEY),
            "--expect-numerics",
            str(good),
            "--out",
            str(textfiles / f"{name}.prom"),
        )
        assert exported.returncode == 0, exported.stderr
    scraped = _scraped_by_node_exporter(binary, textfiles)
    assert scraped[("node_textfile_scrape_error", frozenset())] == 0
    matches = {labels: value for (name, labels), value in scraped.items() if name == "lockgen_numerics_reference_match"}
    assert sorted(matches.values()) == [0.0, 1.0]
    [odd_labels] = [dict(labels) for labels, value in matches.items() if value == 0]
    assert (
        odd_labels["differing"] == "gemm_tf32"
        and "NVIDIA_TF32_OVERRIDE=0" in odd_labels["cause"]
        and odd_labels["mode"] == "quick"
    )
