"""A pinned numerics reference (`verify --expect-numerics FILE`, `cert export --expect-numerics FILE`): a good
node's certificate, its `numerics` object, or a list of either; anything else refused as no reference (the file
and, in a list, the entry named), two entries of one key that disagree refused as ambiguous, a signed certificate
proven under the keys given, and what a judgement says when a digest was measured on one side only, when the
reference records no settings, and, in every format, when no reference is for the certificate's key."""

from __future__ import annotations

import datetime as dt
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from lockgen.adapters.node import signing
from lockgen.api.steps.certificate_steps import read_numerics_references
from lockgen.core.certificate.cert_formats import junit_report, nfd_features, npd_status, prometheus_text
from lockgen.core.certificate.numerics import (
    MEASURED_OTHERWISE,
    NO_REFERENCE,
    NumericsReference,
    compare_pair,
    judge_against,
    judged_certificate,
)
from lockgen.errors import UserError
from lockgen.model.certificate import Certificate, CertificateBody
from tests.conftest import REPO, run_cli

EVIDENCE = REPO / "envs" / "examples" / "numerics-fingerprint"
GOOD = EVIDENCE / "node1-quick.cert.json"
REFERENCE_HINT = (
    "pass a certificate of a node known to be good, or its `numerics` object ({key, digests}), or a list of them"
)
KEY_HINT = "pass --key KEY.pub"


def _body() -> dict[str, Any]:
    body: dict[str, Any] = json.loads(GOOD.read_text())["certificate"]
    return body


def _unsigned(body: dict[str, Any]) -> str:
    return signing.render({"certificate": body, "signature": None})


def _read(path: Path, keys: dict[str, Any] | None = None) -> tuple[NumericsReference, ...]:
    return read_numerics_references(path, keys or {}, KEY_HINT)


def _refusal(path: Path, keys: dict[str, Any] | None = None) -> UserError:
    with pytest.raises(UserError) as caught:
        _read(path, keys)
    return caught.value


def _write(tmp_path: Path, document: Any, name: str = "ref.json") -> Path:
    path = tmp_path / name
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def test_a_list_takes_certificates_and_numerics_objects(tmp_path: Path) -> None:
    """A list of certificates was refused as `not a lockgen certificate: at key`: each entry is either."""
    body = _body()
    other = {**body["numerics"], "key": {**body["numerics"]["key"], "driver": "575.57.08"}}
    both = _read(_write(tmp_path, [json.loads(_unsigned(body)), other]))
    assert [reference.stack is not None for reference in both] == [True, False]
    assert both[0].numerics.model_dump() == body["numerics"] and both[1].source.endswith("ref.json` (entry 1)")
    refused = _refusal(_write(tmp_path, [other, json.loads(_unsigned(body)), {"key": {}}]))
    assert "ref.json` (entry 2) is not a numerics reference" in refused.message and refused.hint == REFERENCE_HINT


MALFORMED = [
    {},
    None,
    42,
    "x",
    [],
    [[{}]],
    {"key": {"device": "d", "work": "w", "other": 1}, "digests": {}},
    {"key": {"device": "d", "work": "w"}, "digests": {}, "other": 1},
]


@pytest.mark.parametrize("document", MALFORMED, ids=[json.dumps(document) for document in MALFORMED])
def test_a_malformed_reference_is_said_to_be_no_reference(tmp_path: Path, document: Any) -> None:
    refused = _refusal(_write(tmp_path, document))
    assert "ref.json`" in refused.message and "certificate is" not in refused.message
    assert "lockgen certificate" not in refused.message and refused.hint == REFERENCE_HINT


def test_an_edited_certificate_is_refused_naming_the_file_as_the_reference(tmp_path: Path) -> None:
    reindented = json.dumps(json.loads(_unsigned(_body())), indent=4)
    refused = _refusal(_write(tmp_path, reindented))
    assert "ref.json` is not a numerics reference: certificate bytes differ" in refused.message
    assert refused.hint == REFERENCE_HINT


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
FIELDS = st.sampled_from(["key", "digests", "certificate", "signature", "device", "work"])
SHAPED = st.recursive(  # documents near a reference's shape: its fields, with any values
    JSON,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(FIELDS, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(document=st.one_of(JSON, SHAPED))
def test_any_json_is_a_reference_or_a_user_error(tmp_path: Path, document: Any) -> None:
    path = _write(tmp_path, document)
    try:
        references = _read(path)
    except UserError as refused:
        assert refused.hint and "\n" not in refused.message
        return
    assert references and all(reference.numerics.key.device is not None for reference in references)


def test_two_entries_of_one_key_must_agree(tmp_path: Path) -> None:
    """`[bad, good]` failed a good node and `[good, bad]` passed it: the first silently won."""
    good = _body()["numerics"]
    bad = {**good, "digests": {**good["digests"], "gemm_tf32": "0" * 64}}
    for entries in ([bad, good], [good, bad]):
        refused = _refusal(_write(tmp_path, entries))
        assert "is ambiguous" in refused.message and "(entry 0)" in refused.message and "(entry 1)" in refused.message
    assert len(_read(_write(tmp_path, [good, good]))) == 2


def test_a_signed_reference_is_proven_under_the_keys_given(tmp_path: Path) -> None:
    private, public = signing.keygen(tmp_path / "k")
    other, _ = signing.keygen(tmp_path / "other")
    keys = signing.public_keys([public])
    body = _body()
    signed = signing.signed_file(body, private)
    assert _read(_write(tmp_path, signed), keys)[0].stack is not None
    assert _read(_write(tmp_path, [json.loads(signed)]), keys)[0].stack is not None
    digest = body["numerics"]["digests"]["gemm_tf32"]
    tampered = signed.replace(digest, ("0" if digest[0] != "0" else "1") + digest[1:])
    for document in (tampered, [json.loads(tampered)]):
        refused = _refusal(_write(tmp_path, document), keys)
        assert "ref.json`" in refused.message and "does not verify: its content was changed" in refused.message
        refused = _refusal(_write(tmp_path, document))  # no key: a changed fingerprint could not be told
        assert "no key was given" in refused.message and refused.hint == KEY_HINT
    refused = _refusal(_write(tmp_path, signing.signed_file(body, other)), keys)
    assert "which no key given is" in refused.message and refused.hint == KEY_HINT
    # unsigned, a certificate is as trustworthy as its file, as a bare numerics object is: refusing it would
    # protect nothing, the same file could hold its numerics object
    assert _read(_write(tmp_path, _unsigned(body)), keys)[0].stack is not None
    assert _read(_write(tmp_path, body["numerics"]), keys)  # a numerics object carries no signature to prove


def _judged_pair() -> tuple[CertificateBody, dict[str, str]]:
    certificate = Certificate.model_validate(json.loads(GOOD.read_text())).certificate
    assert certificate.numerics is not None
    return certificate, dict(certificate.numerics.digests)


def test_a_digest_on_one_side_only_is_said_missing_not_hardware() -> None:
    body, digests = _judged_pair()
    assert body.numerics is not None
    fewer = body.numerics.model_copy(update={"digests": {k: v for k, v in digests.items() if k != "gemm_tf32"}})
    reference = NumericsReference(body.numerics, body.stack, "`ref.json`")
    judgement = judge_against(fewer, body.stack, [reference])
    assert not judgement.check.passed and judgement.cause == MEASURED_OTHERWISE
    assert "digest gemm_tf32 is in the reference of `ref.json` but was not measured here" in judgement.check.detail
    assert "hardware (silent" not in judgement.check.detail
    more = NumericsReference(fewer, None, "`ref.json`")
    assert "gemm_tf32 was measured here but is missing from" in judge_against(body.numerics, {}, [more]).check.detail
    pair = compare_pair(body, body.model_copy(update={"numerics": fewer}))
    assert pair.cause == MEASURED_OTHERWISE and "is in A's but was not measured in B" in pair.line()


def test_a_bare_reference_names_no_setting_as_differing() -> None:
    """A bare `numerics` object records no settings: a setting set alike on both nodes was named as the cause."""
    body, digests = _judged_pair()
    assert body.numerics is not None
    stack = {**body.stack, "settings": {"LD_LIBRARY_PATH": "/opt/lib"}}
    changed = body.numerics.model_copy(update={"digests": {**digests, "gemm_fp32": "0" * 64}})
    bare = judge_against(changed, stack, [NumericsReference(body.numerics, None, "`ref.json`")])
    assert "records no settings" in bare.cause and "setting differs" not in bare.cause
    assert "changes numerics is set" not in bare.cause and "LD_LIBRARY_PATH=/opt/lib" in bare.cause
    whole = judge_against(changed, stack, [NumericsReference(body.numerics, stack, "`ref.json`")])
    assert "records no settings" not in whole.cause


def test_no_reference_for_the_key_is_said_apart_from_other_bits_in_every_format() -> None:
    """A reference of another key rendered as `numerics.reference=differs` and a match of 0, as a mismatch is."""
    body, _ = _judged_pair()
    assert body.numerics is not None
    elsewhere = body.numerics.model_copy(update={"key": body.numerics.key.model_copy(update={"driver": "575"})})
    judged, judgement = judged_certificate(body, [NumericsReference(elsewhere, None, "`ref.json`")])
    assert judgement.outcome == NO_REFERENCE and not judged.passed and not judgement.compared
    suite = ET.fromstring(junit_report(judged, judgement)).find("testsuite")
    assert suite is not None
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["numerics.reference"] == "no reference for this key"
    prom = prometheus_text(judged, judgement)
    assert "lockgen_numerics_reference_match" not in prom
    assert 'reason="no reference for this key"' in prom and "lockgen_numerics_reference_unjudged{" in prom
    features = nfd_features(judged.model_copy(update={"subject": _locked(judged)}), dt.timedelta(days=3650), judgement)
    assert "# numerics: no reference for this key: no reference of `ref.json`" in features
    assert "(numerics: no reference for this key)" in npd_status(judged, judgement)


def _locked(body: CertificateBody) -> Any:
    """The certificate's subject with a lock (NFD names the lock a node was certified for)."""
    return body.subject.model_copy(update={"lock_sha256": "a" * 64})


def test_cert_export_takes_a_list_of_certificates(tmp_path: Path) -> None:
    """A list holding a signed certificate, proven with the key export was given (export refuses a signed file it
    cannot prove, `cert verify`'s rule)."""
    reference = _write(tmp_path, [json.loads(GOOD.read_text())])
    key = EVIDENCE / "numerics-signing.pub"
    exported = run_cli(
        "cert", "export", str(GOOD), "--format", "junit", "--key", str(key), "--expect-numerics", str(reference)
    )
    assert exported.returncode == 0 and 'name="numerics.reference" value="matches"' in exported.stdout, exported.stderr


def test_verify_refuses_a_signed_reference_it_cannot_prove_before_the_kernel(tmp_path: Path) -> None:
    private, _ = signing.keygen(tmp_path / "k")
    reference = _write(tmp_path, signing.signed_file(_body(), private), "good.cert.json")
    out = tmp_path / "x.cert.json"
    refused = run_cli("verify", "--arch", "cpu", "--quick", "--expect-numerics", str(reference), "--out", str(out))
    assert refused.returncode == 1 and "good.cert.json` is a certificate signed by key" in refused.stderr
    assert "hint: sign this run with the key that signed the reference" in refused.stderr and not out.exists()


@pytest.mark.slow
def test_verify_proves_a_reference_signed_by_its_key_and_says_it_is_for_another_key(tmp_path: Path) -> None:
    """The reference (the H100 evidence, signed here by the run's key) is proven with the public half of `verify
    --key`, then compares nothing on the CPU: the check says no reference is for this node's key, and the prom
    rendering says so apart from a mismatch."""
    private, _ = signing.keygen(tmp_path / "k")
    reference = _write(tmp_path, [json.loads(signing.signed_file(_body(), private))], "good.json")
    out, prom = tmp_path / "x.cert.json", tmp_path / "x.prom"
    judged = run_cli(
        "verify", "--arch", "cpu", "--quick", "--key", str(private), "--expect-numerics", str(reference),
        "--out", str(out), "--emit", f"prom={prom}",
    )  # fmt: skip
    assert judged.returncode == 1 and "no reference of `" in judged.stderr, judged.stderr
    assert "lockgen_numerics_reference_unjudged{" in prom.read_text()
    assert "lockgen_numerics_reference_match" not in prom.read_text()
