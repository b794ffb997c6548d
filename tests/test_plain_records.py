"""The stack's spec and the GPU facts as plain records kept by their input's bytes (`model/records.py`): a record's
JSON document rebuilds that very record without a validator, any other JSON is refused (`NotRebuilt`, never another
exception), and a kept document of another shape is not taken: the stack is parsed again."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lockgen.core.gpu.facts import load_facts
from lockgen.core.stack.spec_parse import parse_stack_text
from lockgen.model.facts import GpuFacts
from lockgen.model.records import NotRebuilt, record_document, record_from_document
from lockgen.model.spec import StackSpec
from tests.conftest import REPO

EXAMPLES = sorted(path for path in REPO.glob("envs/examples/*/stack.toml") if "extends" not in path.read_text())

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: path.parent.name)
def test_an_example_stack_s_document_rebuilds_its_spec(path: Path) -> None:
    spec = parse_stack_text(path.read_text(), str(path))
    document = json.loads(json.dumps(record_document(spec)))
    again = record_from_document(StackSpec, document)
    assert again == spec and json.dumps(record_document(again)) == json.dumps(record_document(spec))


def test_the_packaged_facts_document_rebuilds_the_facts() -> None:
    facts = load_facts()
    again = record_from_document(GpuFacts, json.loads(json.dumps(record_document(facts))))
    assert again == facts and json.dumps(record_document(again)) == json.dumps(record_document(facts))


@settings(max_examples=300)
@given(document=JSON, record=st.sampled_from([StackSpec, GpuFacts]))
def test_any_other_json_is_refused_as_not_rebuilt(document: object, record: type) -> None:
    try:
        rebuilt = record_from_document(record, document)
    except NotRebuilt:
        return
    assert isinstance(rebuilt, record)


@pytest.mark.parametrize(
    ("where", "value"),
    [
        (("targets", 0, "arch"), 90),  # a number where the text was
        (("targets", 0, "platforms"), "linux-64"),  # a text where a list was: not its characters
        (("targets", 0, "cuda_compat"), "loose"),  # not one of its literals
        (("exclude_newer",), "not a date"),
        (("pypi_options", "torch_indexes"), ["cpu"]),
        (("targets", 0, "unknown"), 1),  # a field the record has not
    ],
)
def test_a_field_of_another_type_is_refused(where: tuple[str | int, ...], value: object) -> None:
    text = (REPO / "envs/examples/pytorch-cuda/stack.toml").read_text()
    document = record_document(parse_stack_text(text))
    document["exclude_newer"] = "2025-01-01"
    record_from_document(StackSpec, document)
    holder = document
    for step in where[:-1]:
        holder = holder[step]
    holder[where[-1]] = value
    with pytest.raises(NotRebuilt):
        record_from_document(StackSpec, document)


@pytest.mark.parametrize("where", [("image",), ("targets", 0, "driver"), ("pypi_options",)])
def test_a_document_missing_an_optional_field_is_refused_not_completed(where: tuple[str | int, ...]) -> None:
    """A kept document holds every field (`record_document` writes them all): one without a field is not completed
    by the record's default, which validation could refuse (a GPU target without its driver)."""
    document = record_document(parse_stack_text((REPO / "envs/examples/pytorch-cuda/stack.toml").read_text()))
    holder = document
    for step in where[:-1]:
        holder = holder[step]
    del holder[where[-1]]
    with pytest.raises(NotRebuilt):
        record_from_document(StackSpec, document)


def test_a_kept_spec_of_another_shape_is_parsed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kept spec whose document was changed to another shape is not taken: the stack's text is parsed again (and
    its spec kept again in its place)."""
    from lockgen.adapters.lock import kept_inputs
    from lockgen.adapters.lock.stack_file import read_stack
    from lockgen.core.stack import spec_parse

    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("LOCKGEN_REPARSE", raising=False)
    stack = tmp_path / "stack.toml"
    stack.write_text((REPO / "envs/examples/pytorch-cuda/stack.toml").read_text())
    first = read_stack(stack).spec
    sha256 = hashlib.sha256(stack.read_bytes()).hexdigest()
    path = kept_inputs._path("spec", sha256)
    record = json.loads(path.read_text())
    document = json.loads(record["value"]["record"])
    document["targets"][0]["arch"] = 90
    record["value"]["record"] = json.dumps(document)
    path.write_text(json.dumps(record, sort_keys=True, separators=(",", ":")))
    assert kept_inputs.kept_spec(sha256) is None
    parsed: list[object] = []
    parse = spec_parse.parse_stack_text
    monkeypatch.setattr(spec_parse, "parse_stack_text", lambda *args: parsed.append(args) or parse(*args))
    assert read_stack(stack).spec == first and len(parsed) == 1
    assert kept_inputs.kept_spec(sha256) == first  # kept again in its place


@pytest.mark.parametrize(
    "name", ["Dependency", "PypiDependency", "PypiOptions", "Target", "ImageSettings", "StackSpec"]
)
def test_each_spec_record_has_its_model_s_fields_and_aliases(name: str) -> None:
    """The stack's rules (`spec_models`) and its records (`model/spec.py`) name the same fields, in the same order,
    under the same `stack.toml` names, with the same defaults: what the rules accept is what the records hold."""
    import dataclasses

    from lockgen.core.stack import spec_models
    from lockgen.model import spec

    model, record = getattr(spec_models, name), getattr(spec, name)
    in_model = [
        (
            field,
            info.alias,
            None if info.is_required() else spec_models.plain_record(info.get_default(call_default_factory=True)),
        )
        for field, info in model.model_fields.items()
    ]
    in_record = [
        (
            item.name,
            item.metadata.get("alias"),
            None
            if item.default is dataclasses.MISSING and item.default_factory is dataclasses.MISSING
            else item.default_factory()
            if item.default is dataclasses.MISSING
            else item.default,
        )
        for item in dataclasses.fields(record)
    ]
    assert in_record == in_model
