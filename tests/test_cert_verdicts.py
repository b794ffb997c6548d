"""`cert verify` and `cert export` give one file one verdict: several `--key`s, as `fleet status` and `cert
compare` take them (signed by any one, it verifies; by none, the keys tried are named); without a key, a signed
certificate refused by both (export once rendered a forged figure); a certificate's time held to one rule
(`model.certificate_time`) by the model, the plain validation a fleet's status makes, a fleet's ages and every
export format; and Prometheus label values printed with no character a terminal would act on."""

from __future__ import annotations

import datetime as dt
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st
from prometheus_client.parser import text_string_to_metric_families
from pydantic import ValidationError
from pydantic_core import ValidationError as CoreValidationError
from typer.testing import CliRunner

from lockgen.adapters.node.kept_schema import plain_body
from lockgen.adapters.node.signing import keygen, public_fingerprint, render, signed_file
from lockgen.cli.app import app
from lockgen.core.certificate.cert_formats import junit_report, nfd_features, npd_status, prometheus_text
from lockgen.core.fleet.fleet_status import moment
from lockgen.errors import LockFormatError, UserError
from lockgen.model.certificate import CertificateBody
from lockgen.model.certificate_time import created_moment, created_text
from lockgen.model.names import UNSHOWABLE, escaped
from tests.conftest import REPO

TEMPLATE = REPO / "envs" / "examples" / "h200-system" / "h200-lock-full.cert.json"  # passed, bound to a lock
FORMATS = ("prom", "nfd", "npd", "junit")
XS_DATETIME = re.compile(r"-?[0-9]{4,}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}")  # JUnit's timestamp


def _body(**changes: object) -> dict:
    body: dict = json.loads(TEMPLATE.read_text())["certificate"]
    return {**body, **changes}


def _keys(folder: Path) -> tuple[Path, Path]:
    """Two signers' private keys (their public keys beside them, as KEY.pub)."""
    for name in ("k1", "k2"):
        keygen(folder / name)
    return folder / "k1", folder / "k2"


def _cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def _one_error(code: int, stderr: str) -> str:
    lines = stderr.splitlines()
    assert code == 1 and len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: "), stderr
    return lines[0]


@pytest.mark.parametrize("command", [["cert", "verify"], ["cert", "export", "--format", "npd"]])
def test_several_keys_verify_a_certificate_signed_by_any_of_them(tmp_path: Path, command: list[str]) -> None:
    """Failed before: a repeated --key kept only the last one, and a certificate signed by the first was refused
    (`signed by key a1b9..., not ea02...`)."""
    k1, k2 = _keys(tmp_path)
    certificate = tmp_path / "n1.cert.json"
    certificate.write_text(signed_file(_body(), k1))
    for keys in ([k1, k2], [k2, k1]):
        code, out, err = _cli(*command, str(certificate), *(f"--key={key}.pub" for key in keys))
        assert code == 0 and "passed" in out.lower() and err == "", err
    error = _one_error(*_cli(*command, str(certificate), "--key", f"{k2}.pub")[::2])
    signer, tried = public_fingerprint(Path(f"{k1}.pub"))[:16], public_fingerprint(Path(f"{k2}.pub"))[:16]
    assert f"signed by key {signer}, which no --key given is (keys tried: {tried} of `{k2}.pub`)" in error


def _certificates(folder: Path) -> dict[str, Path]:
    """Files `cert verify` and `cert export` must judge alike: a good signed one, its forgery (a figure edited by
    hand, the signature kept), an unsigned one, and signed ones whose time breaks the rule."""
    k1, _ = _keys(folder)
    files = {"good": signed_file(_body(), k1), "unsigned": render({"certificate": _body(), "signature": None})}
    good = files["good"]
    edited = json.loads(good)["certificate"]["figures"]["gemm"]["bf16"]["value"]
    files["forged"] = good.replace(f'"value": {edited}', f'"value": {edited + 100}', 1)
    assert files["forged"] != good
    for name, created in (("yesterday", "yesterday"), ("30 February", "2026-02-30T00:00:00Z")):
        files[name] = signed_file(_body(created=created), k1)
    files["fullwidth"] = signed_file(_body(created="\uff12\uff10\uff12\uff16-12-01T00:00:00Z"), k1)
    paths = {}
    for name, text in files.items():
        paths[name] = folder / f"{name.replace(' ', '-')}.cert.json"
        paths[name].write_text(text)
    return paths


@pytest.mark.parametrize("keyed", [False, True])
def test_cert_export_gives_the_verdict_cert_verify_gives(tmp_path: Path, keyed: bool) -> None:
    """Each file refused by `cert verify` is refused by `cert export` in every format, with the same error line; each
    it accepts is rendered. Failed before: without --key, export rendered the forged figure (exit 0), and took the
    time `yesterday` in npd; with it, npd took the 30 February and every format the fullwidth digits."""
    paths = _certificates(tmp_path)
    key = ["--key", str(tmp_path / "k1.pub")] if keyed else []
    for name, path in paths.items():
        code, _, err = _cli("cert", "verify", str(path), *key)
        refused = err.startswith("error: ")
        assert code == (1 if refused else 0), (name, err)
        assert refused == (name != "good" if keyed else name != "unsigned"), (name, err)
        for fmt in FORMATS:
            exported = _cli("cert", "export", str(path), "--format", fmt, *key)
            if refused:
                assert _one_error(exported[0], exported[2]) == err.splitlines()[0], (name, fmt)
            else:
                assert exported[0] == 0 and exported[1], (name, fmt, exported[2])
                unsigned_note = "note: `" + str(path) + "` is unsigned: only its form was checked"
                assert (unsigned_note in exported[2]) == (not keyed), exported[2]


def test_fleet_status_and_cert_compare_without_key_say_the_signatures_were_not_checked(tmp_path: Path) -> None:
    """The views of many certificates show a signed one read without its key with a note (the verdict commands,
    `cert verify` and `cert export`, refuse it): what docs/guide/certificates.md says of each."""
    paths = _certificates(tmp_path)
    code, _, err = _cli("cert", "compare", str(paths["good"]), str(paths["good"]))
    assert code == 0 and "note: signatures were not checked" in err, err
    guide = (REPO / "docs" / "guide" / "fleet.md").read_text()
    assert "signatures were not checked" in guide and "--key K1.pub --key K2.pub" in guide


NEAR_TIMES = st.builds(
    lambda year, month, day, hour, minute, second, digit: (
        f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}Z".replace("1", digit)
    ),
    st.integers(0, 10_000),
    st.integers(0, 13),
    st.integers(0, 32),
    st.integers(0, 24),
    st.integers(0, 60),
    st.integers(0, 61),
    st.sampled_from(["1", "1", "1", "\uff11", "\u0661", "x"]),  # ASCII, or a digit elsewhere in Unicode
)
ANY_TIME = st.one_of(
    NEAR_TIMES,
    st.datetimes(min_value=dt.datetime(1, 1, 1)).map(lambda moment: moment.strftime("%Y-%m-%dT%H:%M:%SZ")),
    st.text(max_size=24),
    st.from_regex(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z\n?", fullmatch=True),
)
BODY = _body()


def _strict(created: str) -> dt.datetime | None:
    """The rule as stated: YYYY-MM-DDTHH:MM:SSZ in ASCII digits, a date and time Python's calendar has."""
    if re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z", created, re.ASCII) is None:
        return None
    try:
        return dt.datetime.strptime(created, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)
    except ValueError:
        return None


@settings(max_examples=400, deadline=None)
@given(created=ANY_TIME)
def test_one_time_rule_for_every_reader(created: str) -> None:
    """Any text as a certificate's time: either a time every reader takes alike, or refused by each as a
    LockFormatError or a UserError, never another exception. Failed before: the model took any text, npd printed
    it, junit took fullwidth digits (strptime's), a fleet's status refused what the others took."""
    found = created_moment(created)
    assert found == _strict(created)
    assert found is None or created_text(found) == created  # the form it is written in, read back
    try:
        body = CertificateBody.model_validate({**BODY, "created": created})
    except ValidationError:
        body = None
    assert (body is not None) == (found is not None)
    try:
        plain_body(json.dumps({**BODY, "created": created}))
        plain = True
    except CoreValidationError:
        plain = False
    assert plain == (found is not None)  # a fleet's plain validation carries the rule as data
    try:
        assert moment(created) == found
    except LockFormatError:
        assert found is None
    made = CertificateBody.model_validate(BODY).model_copy(update={"created": created})  # unvalidated, as in code
    for render_one in (prometheus_text, nfd_features, npd_status, junit_report):
        try:
            render_one(made)
        except (LockFormatError, UserError):
            assert found is None, render_one
        else:
            assert found is not None, render_one


@pytest.mark.parametrize(
    "moment", [dt.datetime(1, 1, 1), dt.datetime(999, 12, 31, 23, 59, 59), dt.datetime(2026, 2, 28)]
)
def test_verify_writes_its_time_as_every_reader_reads_it(moment: dt.datetime) -> None:
    """`verify` wrote `created` with strftime, whose `%Y` writes the year 1 as `1`: a certificate the model then
    refused. It writes by `created_text`, the rule's own writer, whose text every reader takes back."""
    from lockgen.api import verify

    assert verify.created_text is created_text
    created = created_text(moment.replace(tzinfo=dt.timezone.utc))
    assert created_moment(created) == moment.replace(tzinfo=dt.timezone.utc) and created[:4] == f"{moment.year:04d}"
    assert CertificateBody.model_validate({**BODY, "created": created}).created == created


def test_the_earliest_year_is_written_in_four_digits() -> None:
    """Failed before: JUnit's timestamp of the year 1 was `1-01-01T00:00:00`, no xs:dateTime; NFD's expiry too."""
    body = CertificateBody.model_validate({**BODY, "created": "0001-01-01T00:00:00Z"})
    suite = ET.fromstring(junit_report(body)).find("testsuite")
    assert suite is not None and suite.get("timestamp") == "0001-01-01T00:00:00"
    assert XS_DATETIME.fullmatch(suite.get("timestamp") or "")
    assert "# +expiry-time=0001-01-08T00:00:00Z" in nfd_features(body)
    assert "(run 0001-01-01T00:00:00Z" in npd_status(body)


LABEL_TEXT = st.text(st.characters(codec="utf-8"), max_size=12) | st.sampled_from(
    ["sm90\x1b[31m", "a\u202eb", "line\nbreak", 'quote " and \\ slash', "\x9b2J"]
)


@settings(max_examples=150, deadline=None)
@given(arch=LABEL_TEXT, target=LABEL_TEXT)
def test_prometheus_label_values_carry_no_character_a_terminal_acts_on(arch: str, target: str) -> None:
    """Every label value keeps valid exposition text (Prometheus's parser reads it back) with each character a
    terminal would not show written as its escape (`names.escaped`), a newline as Prometheus's own `\\n`. Failed
    before: `arch="sm90\\x1b[31m"` reached the terminal with a raw ESC."""
    body = CertificateBody.model_validate(BODY)
    odd = body.model_copy(update={"arch": arch, "subject": body.subject.model_copy(update={"target": target})})
    text = prometheus_text(odd)
    assert not UNSHOWABLE.search(text.replace("\n", "")), ascii(text)
    [passed] = [
        sample.labels
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "lockgen_certificate_passed"
    ]
    assert passed["arch"] == "\n".join(escaped(line) for line in arch.split("\n"))
    assert passed["target"] == "\n".join(escaped(line) for line in target.split("\n"))


def test_cert_export_prints_an_escaped_label_to_the_terminal(tmp_path: Path) -> None:
    k1, _ = _keys(tmp_path)
    certificate = tmp_path / "n1.cert.json"
    certificate.write_text(signed_file(_body(arch="sm90\x1b[31m"), k1))
    code, out, err = _cli("cert", "export", str(certificate), "--format", "prom", "--key", f"{k1}.pub")
    assert code == 0 and "\x1b" not in out and 'arch="sm90\\\\x1b[31m"' in out, (out, err)
