"""A certificate body validated from its JSON text by `CertificateBody`'s own rules into plain values (dicts, lists,
text, numbers) instead of models: what a fleet's status reads of 10,000 certificates, where building about a
hundred records a certificate cost half of its validation.

The validator is made from the model's own core schema, not written again: each record (`model`) becomes an
object of the same fields, types and strictness, extra fields refused, a field with a default optional (left out
when absent: a reader of the plain value reads the default where a field may be missing); the figures' one
validator of its own (`comparable_values`: a value null or a finite number, a unit that is text) becomes the
schema's rule on the figure's value (`allow_inf_nan` off: NaN, an infinity and a number past a float's range are
refused; the unit is already strict text), so nothing runs in Python. Every other float under the figures is held
to it too (`finite_in_figures`). A schema holding any other validator, or a record of another kind (a custom
`__init__`, a root model, extra fields allowed), is refused when this module is loaded: a rule this validation
would drop is found by the tests, not in a fleet.

What it trusts and where it differs: the models read a body's figures as Python values first (the validator of
`figures` runs before them), so a figures object that repeats a key is read by its last value there, while this
validation reads every one and may refuse it; it never accepts a body the models refuse, and a caller that finds
it refused reads the body with the models (`certificate_proof.proven_facts`), which word the reason
(tests/test_plain_certificate.py compares both on bodies edited by hypothesis and on repeated keys).

The validator's schema is kept as data (`kept_form`): a status builds the validator from it with pydantic-core
alone (`adapters.node.kept_schema.plain_body`); `made_validator` is the one pydantic makes of the same schema, the
tests hold the two equal (tests/test_kept_schema.py)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from pydantic import TypeAdapter

from lockgen.model.certificate import CertificateBody, comparable_values

__all__ = ["kept_form", "made_validator"]


def made_validator() -> Any:
    """The plain validator as pydantic makes it from the models (`TypeAdapter`), not from the kept form: what a
    status validates by where this pydantic's schema holds more than data (`kept_form` refuses it, and nothing is
    kept), and what the tests hold the kept form's validator equal to."""
    return _adapter().validator


@lru_cache(maxsize=1)
def _adapter() -> TypeAdapter[Any]:
    """The plain body's type adapter, made once a process: its validator and its core schema (the kept form's)."""
    CertificateBody.model_rebuild()  # the models defer their schema until first used
    return TypeAdapter(_PlainBody)


def kept_form() -> dict[str, Any]:
    """The plain validator's core schema as data alone (what `marshal` writes, for `adapters.node.kept_schema`,
    which builds the same validator from it without pydantic): how values are written (`serialization`) and notes
    (`metadata`) left out, as no rule of what is read; a JSON value's validation (`json-or-python`, whose Python
    side is a function) as its JSON side, the only one JSON text is validated by. TypeError for anything else
    that is not data (a validator in Python), so a rule the kept form would drop is found by the tests."""
    form: dict[str, Any] = _as_data(_adapter().core_schema)
    return form


def _as_data(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_as_data(item) for item in schema]
    if isinstance(schema, dict):
        if schema.get("type") == "json-or-python":  # its name (`ref`) kept, for what refers to it
            return _as_data({**schema["json_schema"], **({"ref": schema["ref"]} if "ref" in schema else {})})
        return {
            key: {name: _as_data(item) for name, item in value.items()}
            if key == "fields" and isinstance(value, dict)  # field names: none is a schema's key
            else _as_data(value)
            for key, value in schema.items()
            if key not in _SKIPPED
        }
    if schema is None or isinstance(schema, (str, int, float)):  # bool is an int
        return schema
    raise TypeError(f"a {type(schema).__name__} in the plain validator's schema: not data to keep")


class _PlainBody:
    """The type the validator is made for: `CertificateBody`'s core schema with its records as plain objects."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        return finite_in_figures(plain_schema(CertificateBody.__pydantic_core_schema__))


_SKIPPED = frozenset({"serialization", "metadata"})  # how a value is written, or notes: no rule of what is read


def plain_schema(schema: Any) -> Any:
    """`schema` (a pydantic core schema, or a part of one) with each record an object of the same fields, and the
    figures' finite-value rule in the schema; TypeError for a validator or a record it cannot carry over."""
    if isinstance(schema, list):
        return [plain_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    kind = schema.get("type")
    if kind == "model":
        return _record(schema)
    if kind == "function-before" and schema["function"].get("function") is comparable_values:
        return _finite_figures(plain_schema(schema["schema"]))
    if isinstance(kind, str) and kind.startswith("function-"):
        raise TypeError(f"a {kind} validator in a certificate's schema: the plain validation would drop its rule")
    return {key: value if key in _SKIPPED else plain_schema(value) for key, value in schema.items()}


def finite_in_figures(schema: dict[str, Any]) -> dict[str, Any]:
    """The plain body's `schema` with every float under its figures (and in the definitions they refer to, such
    as a GPU reading's spread) refused unless finite. The models read the figures as Python values before their
    records, so an integer past a float's range (10**400) fails any of those floats there, where JSON's reader
    takes it as an infinity; refusing NaN and the infinities there too is stricter than the models only for a
    body the fleet then reads with the models."""
    if schema.get("type") != "definitions":
        raise TypeError("the certificate's schema no longer holds its records' definitions")
    body = schema["schema"]
    figures = body.get("fields", {}).get("figures") if body.get("type") == "typed-dict" else None
    if figures is None:
        raise TypeError("the certificate's body no longer has its figures")
    refs: set[str] = set()
    finite = {**figures, "schema": _finite(figures["schema"], refs)}
    definitions = {definition["ref"]: definition for definition in schema["definitions"]}
    done: set[str] = set()
    while refs - done:
        ref = min(refs - done)
        done.add(ref)
        definitions[ref] = _finite(definitions[ref], refs)
    return {
        **schema,
        "schema": {**body, "fields": {**body["fields"], "figures": finite}},
        "definitions": list(definitions.values()),
    }


def _finite(schema: Any, refs: set[str]) -> Any:
    """`schema` with each float in it refused unless finite; the definitions it refers to added to `refs`."""
    if isinstance(schema, list):
        return [_finite(item, refs) for item in schema]
    if not isinstance(schema, dict):
        return schema
    if schema.get("type") == "float":
        return {**schema, "allow_inf_nan": False}
    if schema.get("type") == "definition-ref":
        refs.add(schema["schema_ref"])
    return {key: _finite(value, refs) for key, value in schema.items()}


def _record(schema: dict[str, Any]) -> dict[str, Any]:
    fields = schema["schema"]
    config = schema.get("config", {})
    if (
        schema.get("custom_init")
        or schema.get("root_model")
        or schema.get("post_init")
        or fields.get("type") != "model-fields"
        or fields.get("model_validators")
        or fields.get("extras_schema")
        or config.get("extra_fields_behavior") != "forbid"
        or config.get("strict")
    ):
        raise TypeError(f"the record {schema.get('cls')} is not plain fields with extra ones refused")
    plain: dict[str, Any] = {}
    for name, field in fields["fields"].items():
        if set(field) - {"type", "schema", "metadata"}:  # an alias, a field validated by another name
            raise TypeError(f"the field {name} of {schema.get('cls')} has {sorted(field)}")
        inner = field["schema"]
        required = inner.get("type") != "default"
        plain[name] = {
            "type": "typed-dict-field",
            "schema": plain_schema(inner if required else inner["schema"]),
            "required": required,
        }
    record = {"type": "typed-dict", "fields": plain, "extra_behavior": "forbid"}
    if "ref" in schema:
        record["ref"] = schema["ref"]
    return record


def _finite_figures(schema: dict[str, Any]) -> dict[str, Any]:
    """The figures' schema (by group, then name, a figure) with each figure's value refused unless null or a
    finite number, as `comparable_values` refuses it (its unit is strict text in the record already)."""
    figure = schema["values_schema"]["values_schema"]
    value = figure["fields"]["value"]["schema"]
    unit = figure["fields"]["unit"]["schema"]
    if (
        schema["type"] != "dict"
        or figure["type"] != "typed-dict"
        or value["type"] != "nullable"
        or value["schema"] != {"type": "float", "strict": True}
        or unit != {"type": "str", "strict": True}
    ):
        raise TypeError("the figures are no longer objects of figures with a float value and a text unit")
    finite = {**value, "schema": {**value["schema"], "allow_inf_nan": False}}
    fields = {**figure["fields"], "value": {**figure["fields"]["value"], "schema": finite}}
    return {**schema, "values_schema": {**schema["values_schema"], "values_schema": {**figure, "fields": fields}}}
