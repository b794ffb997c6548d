"""A certificate body validated as plain values (`kept_schema.plain_body`, what a fleet's status reads)
accepts exactly the bodies `CertificateBody` accepts, and a fleet's facts of it are the facts of the models: on every
example certificate, on bodies edited by hypothesis (a value replaced by any JSON value, NaN and huge numbers
included, a field removed or added), on the figures' finite-value rule and on repeated keys, where it may refuse
what the models take (they read the figures' last value) but never takes what they refuse."""

from __future__ import annotations

import json
from dataclasses import astuple
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st
from pydantic import ValidationError, field_validator

from lockgen.api.fleet_status import SharedFacts
from lockgen.core.fleet.fleet_status import CertificateFacts, certificate_facts, plain_facts
from lockgen.model.base import Frozen
from lockgen.model.certificate import CertificateBody, Text
from lockgen.adapters.node.kept_schema import plain_body
from lockgen.model.plain_certificate import plain_schema
from tests.conftest import REPO

TEMPLATE = REPO / "envs" / "examples" / "numerics-fingerprint" / "node1-quick.cert.json"
EXAMPLES = sorted(path for path in (REPO / "envs" / "examples").rglob("*.cert.json"))


def _facts_by_models(text: str) -> str:
    """The facts a fleet reads of the body `text` through its models (`certificate_facts`), or `refused`."""
    try:
        body = CertificateBody.model_validate_json(text)
    except ValidationError:
        return "refused"
    if body.passed != all(check.passed for check in body.checks):
        return "refused"
    return _comparable(certificate_facts(body))


def _facts_plain(text: str) -> str:
    """The same through the plain validation (`plain_body`, `plain_facts`, read back as `fleet status` reads them)."""
    try:
        body = plain_body(text)
    except ValidationError:
        return "refused"
    if body["passed"] != all(check["passed"] for check in body["checks"]):
        return "refused"
    facts = SharedFacts().kept(plain_facts(body))  # read back as a kept verdict is
    assert facts is not None
    return _comparable(facts)


def _comparable(facts: CertificateFacts) -> str:
    """The facts as text, each object's keys sorted (a NaN in the stack's settings is then equal to itself)."""
    numerics = facts.numerics.as_json() if facts.numerics is not None else None
    return json.dumps([*astuple(facts)[:6], numerics, facts.stack], sort_keys=True)


def _body(path: Path = TEMPLATE) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(path.read_text())["certificate"]
    return body


@pytest.mark.parametrize("path", EXAMPLES, ids=[path.name for path in EXAMPLES])
def test_every_example_certificate_gives_the_facts_its_models_give(path: Path) -> None:
    text = json.dumps(_body(path))
    assert _facts_plain(text) == _facts_by_models(text) != "refused"


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON value: each object's keys and each list's items, recursively."""
    found = [at]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*at, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*at, index))
    return found


TEMPLATE_PLACES = _paths(_body())[1:]
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from([10**400, -(10**400), 2**64, 0, 1])
    | st.floats()
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=400, deadline=None)
@given(
    place=st.sampled_from(TEMPLATE_PLACES),
    how=st.sampled_from(["replace", "remove", "add"]),
    value=JSON_VALUES,
    name=st.sampled_from(["value", "unit", "passed", "extra", "reason", "bursts", "digests", "x"]),
)
def test_a_body_edited_anywhere_is_accepted_or_refused_by_both_alike(
    place: tuple[Any, ...], how: str, value: Any, name: str
) -> None:
    """One place of a valid body changed: its value replaced by any JSON value, the field removed, or a field added
    beside it; the plain validation accepts exactly what the models accept, with the same facts."""
    body = _body()
    *parent_path, last = place
    parent: Any = body
    for step in parent_path:
        parent = parent[step]
    if how == "replace":
        parent[last] = value
    elif how == "remove" and isinstance(parent, dict):
        del parent[last]
    elif isinstance(parent[last], dict):
        parent[last][name] = value
    else:
        parent[last] = value
    text = json.dumps(body)  # NaN and Infinity as JSON's readers take them
    plain = _facts_plain(text)  # where the plain validation refuses, the fleet reads the body with the models
    assert plain == "refused" or plain == _facts_by_models(text)


def test_the_body_unedited_is_taken_plain() -> None:
    text = json.dumps(_body())
    assert _facts_plain(text) != "refused" and _facts_plain(text) == _facts_by_models(text)


@pytest.mark.parametrize("value", ["1" + "0" * 400, "-1" + "0" * 400, "NaN", "Infinity"])
def test_a_number_past_a_float_s_range_in_a_figure_s_record_is_never_taken(value: str) -> None:
    """The models read the figures as Python values before their records: an integer past a float's range in a
    record's float (a GPU's clock during a step) fails there; JSON's reader would take it as an infinity. Found
    by the hypothesis edit above (figures/training/fp32_step_ms/gpu/mem_mhz/max = 10**400) on the merge."""
    body = _body()
    gpu = body["figures"]["training"]["fp32_step_ms"]["gpu"]
    gpu["mem_mhz"]["max"] = 1.5
    text = json.dumps(body).replace('"max": 1.5', f'"max": {value}', 1)
    assert text != json.dumps(body)
    plain = _facts_plain(text)
    assert plain == "refused" or plain == _facts_by_models(text)


@pytest.mark.parametrize(
    "value",
    ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1" + "0" * 400, "1" + "0" * 300, str(2**53 + 1), "true",
     '"1"', "5", "-0.0", "1e-400", "null", "[1]", "{}", str(2**64)],
)  # fmt: skip
def test_a_figure_s_value_is_held_to_the_models_finite_number_rule(value: str) -> None:
    """`comparable_values`, the figures' validator in the models, refuses a value that is neither null nor a finite
    number; the plain validation holds it in the schema, and takes and refuses the same values."""
    text = json.dumps(_body()).replace('"value": 786.318', f'"value": {value}', 1)
    assert text != json.dumps(_body())
    assert _facts_plain(text) == _facts_by_models(text)


REPEATED = {
    "a figure's value: refused, then taken": ('"value": 786.318', '"value": "x", "value": 786.318'),
    "a figure's value: taken, then refused": ('"value": 786.318', '"value": 786.318, "value": "x"'),
    "a figure repeated, refused first": ('"bf16": {"bursts"', '"bf16": 5, "bf16": {"bursts"'),
    "a group repeated, refused first": ('"gemm": {', '"gemm": {"bf16": 5}, "gemm": {'),
    "a group repeated, taken first": ('"gemm": {', '"gemm": {}, "gemm": {'),
    "passed, true then false": ('"passed": true, "schema_"', '"passed": true, "passed": false, "schema_"'),
    "passed, false then true": ('"passed": true, "schema_"', '"passed": false, "passed": true, "schema_"'),
    "a check's verdict repeated": ('"passed": true, "value": null}', '"passed": true, "value": null, "passed": false}'),
    "created, refused first": ('"created": "', '"created": 5, "created": "'),
    "the numerics repeated": ('"numerics": {', '"numerics": null, "numerics": {'),
}


@pytest.mark.parametrize("case", list(REPEATED))
def test_a_repeated_key_is_never_taken_where_the_models_refuse_it(case: str) -> None:
    """JSON allows a key twice; the models read the figures as Python values first (the last one counts), the
    plain validation reads each: where they differ it refuses (the fleet then reads the file with the models),
    and whatever it takes, the models take with the same facts."""
    old, new = REPEATED[case]
    text = json.dumps(_body())
    assert old in text
    text = text.replace(old, new, 1)
    plain = _facts_plain(text)
    assert plain in ("refused", _facts_by_models(text)), case


def test_a_rule_the_plain_validation_cannot_carry_is_refused_when_it_is_made() -> None:
    """A validator of a record's own, or a record that takes extra fields, is no rule the plain schema has: it is
    refused when the validator is made (on CertificateBody: when this module loads), never dropped."""

    class Ruled(Frozen):
        name: Text

        @field_validator("name")
        @classmethod
        def _lower(cls, value: str) -> str:
            return value.lower()

    class Open(Frozen, extra="allow"):
        name: Text

    for record in (Ruled, Open):
        record.model_rebuild()
        with pytest.raises(TypeError):
            plain_schema(record.__pydantic_core_schema__)
