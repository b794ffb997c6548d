"""The certificate body's plain validation kept as data (`adapters.node.kept_schema`): the validator the models'
plain one is, made from a kept schema without pydantic; made again from a damaged one; a kept schema trusted as
lockgen's home is, and never taken under LOCKGEN_REPARSE=1. And `fleet status` proving new certificates with
pydantic-core alone and re-reading kept ones with neither pydantic nor the models (issue 48: a status's fixed
cost)."""

from __future__ import annotations

import json
import marshal
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic_core import SchemaValidator, ValidationError

from lockgen.adapters.node.signing import signed_file
from lockgen.adapters.node import kept_schema
from lockgen.model import plain_certificate
from lockgen.model.plain_certificate import kept_form, made_validator
from tests.conftest import REPO, run_cli

TEMPLATE = REPO / "envs" / "examples" / "numerics-fingerprint" / "node1-quick.cert.json"

CHILD = """
import json, os, sys
from lockgen.adapters.node import kept_schema
text = sys.stdin.buffer.read()
try:
    result = ["accepted", kept_schema.plain_body(text)]
except Exception as error:  # pydantic-core's ValidationError: pydantic itself is not imported to name it
    result = ["refused", [[list(e["loc"]), e["type"]] for e in error.errors(include_url=False)]]
made = "pydantic" in sys.modules, "lockgen.model.certificate" in sys.modules
print(json.dumps([result, *made, os.path.exists(kept_schema.kept_path())]))
"""


def _in_child(text: bytes, home: Path, reparse: bool = False) -> list:
    """[the verdict, pydantic imported, the models imported, a schema kept after] of a fresh process."""
    env = {"LOCKGEN_HOME": str(home), **({"LOCKGEN_REPARSE": "1"} if reparse else {})}
    done = subprocess.run(
        [sys.executable, "-c", CHILD], input=text, capture_output=True, check=True, env={**_environ(), **env}
    )
    verdict: list = json.loads(done.stdout)
    return verdict


def _environ() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if name not in ("LOCKGEN_HOME", "LOCKGEN_REPARSE")}


def _verdict_here(text: bytes) -> list:
    """The verdict of the validator pydantic makes of the models (`made_validator`), not of the kept form."""
    try:
        return ["accepted", json.loads(json.dumps(made_validator().validate_json(text)))]
    except ValidationError as error:
        return ["refused", [[list(e["loc"]), e["type"]] for e in error.errors()]]


def _bodies() -> dict[str, bytes]:
    body = json.loads(TEMPLATE.read_text())["certificate"]
    body["figures"]["gemm"]["bf16"]["value"] = 123456.789
    return {
        "as written": json.dumps(body).encode(),
        "an extra field": json.dumps({**body, "extra": 1}).encode(),
        "a figure past a float": json.dumps(body).replace("123456.789", "1e999").encode(),
        "not a body": b'{"arch": 5}',
    }


def test_a_kept_schema_validates_as_the_models_plain_validator_without_pydantic(tmp_path: Path) -> None:
    for index, (name, text) in enumerate(_bodies().items()):
        home = tmp_path / str(index)
        first = _in_child(text, home)
        assert first[1:] == [True, True, True], name  # made from the models, and kept
        second = _in_child(text, home)
        assert second[1:] == [False, False, True], name  # made from the kept schema: no pydantic, no models
        assert first[0] == second[0] == _verdict_here(text), name
        assert [path.name for path in (home / "kept" / "schemas").iterdir()] == [Path(kept_path(home)).name]


def kept_path(home: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", "from lockgen.adapters.node import kept_schema; print(kept_schema.kept_path())"],
        capture_output=True,
        text=True,
        check=True,
        env={**_environ(), "LOCKGEN_HOME": str(home)},
    )
    return done.stdout.strip()


@pytest.mark.parametrize("damage", [b"", b"not marshal", marshal.dumps([1, 2]), marshal.dumps({"type": "nothing"})])
def test_a_damaged_kept_schema_is_made_again(tmp_path: Path, damage: bytes) -> None:
    path = Path(kept_path(tmp_path))
    path.parent.mkdir(parents=True)
    path.write_bytes(damage)
    text = _bodies()["as written"]
    verdict = _in_child(text, tmp_path)
    assert verdict[0] == _verdict_here(text) and verdict[1] is True  # made from the models again
    rebuilt = SchemaValidator(marshal.loads(path.read_bytes()))  # written over: a schema again (its names, `ref`,
    assert rebuilt.validate_json(text) == made_validator().validate_json(text)  # carry the process's ids: judged by
    # what it does


def test_a_home_where_no_schema_can_be_kept_keeps_none_and_still_validates(tmp_path: Path) -> None:
    """A folder where the schema would be written (or a home lockgen cannot write): nothing kept, the body
    validated all the same (never a refusal of the certificate for it)."""
    path = Path(kept_path(tmp_path))
    path.mkdir(parents=True)
    text = _bodies()["as written"]
    assert _in_child(text, tmp_path)[0] == _verdict_here(text) and path.is_dir()


def test_the_most_recent_schemas_are_kept_and_the_older_removed(tmp_path: Path) -> None:
    folder = Path(kept_path(tmp_path)).parent
    folder.mkdir(parents=True)
    for index in range(6):  # other lockgens' and pydantics' schemas, older than the one written now
        other = folder / f"plain-body-{index:032x}.marshal"
        other.write_bytes(marshal.dumps({"type": "any"}))
        os.utime(other, (1_000_000 + index, 1_000_000 + index))
    _in_child(_bodies()["as written"], tmp_path)
    kept = sorted(path.name for path in folder.iterdir())
    assert len(kept) == kept_schema.KEPT_SCHEMAS and Path(kept_path(tmp_path)).name in kept
    assert f"plain-body-{5:032x}.marshal" in kept and f"plain-body-{0:032x}.marshal" not in kept


def test_a_schema_holding_more_than_data_is_validated_as_made_and_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where another pydantic's schema holds what the kept form cannot carry (`kept_form` refuses it), a status
    validates by pydantic's own validator and keeps nothing."""

    def refused() -> dict:
        raise TypeError("a validator in Python")

    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path))
    monkeypatch.setattr(plain_certificate, "kept_form", refused)
    kept_schema.plain_validator.cache_clear()
    try:
        text = _bodies()["as written"]
        assert kept_schema.plain_body(text) == made_validator().validate_json(text)
        assert not (tmp_path / "kept").exists()
    finally:
        kept_schema.plain_validator.cache_clear()


def test_a_kept_schema_is_trusted_as_lockgens_home_is_and_never_taken_under_reparse(tmp_path: Path) -> None:
    """What a kept schema trusts, shown: one that accepts anything, put in lockgen's home by hand, is taken (as a
    kept verdict put there would be); `LOCKGEN_REPARSE=1` makes the schema from the models and refuses the body."""
    path = Path(kept_path(tmp_path))
    path.parent.mkdir(parents=True)
    path.write_bytes(marshal.dumps({"type": "any"}))
    text = _bodies()["not a body"]
    assert _in_child(text, tmp_path)[0] == ["accepted", {"arch": 5}]
    reparsed = _in_child(text, tmp_path, reparse=True)
    assert reparsed[0] == _verdict_here(text) and reparsed[0][0] == "refused" and reparsed[1] is True


def test_the_kept_form_is_data_marshal_writes_and_reads_back_equal() -> None:
    form = kept_form()
    assert marshal.loads(marshal.dumps(form)) == form
    assert "json-or-python" not in json.dumps(form) and '"serialization"' not in json.dumps(form)


def _imported(stderr: str) -> set[str]:
    """The modules `python -X importtime` says it imported."""
    return {line.rsplit("|", 1)[1].strip() for line in stderr.splitlines() if line.startswith("import time:")}


def test_fleet_status_proves_with_pydantic_core_alone_and_rereads_with_no_pydantic(tmp_path: Path) -> None:
    assert run_cli("keygen", "--out", str(tmp_path / "k")).returncode == 0
    body = json.loads(TEMPLATE.read_text())["certificate"]
    folder, home = tmp_path / "fleet", tmp_path / "home"
    folder.mkdir()

    def write(node: str, created: str) -> None:
        (folder / f"{node}.cert.json").write_text(signed_file({**body, "created": created}, tmp_path / "k"))

    def status() -> tuple[dict, set[str]]:
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "lockgen", "fleet", "status", str(folder)]
            + ["--key", f"{tmp_path / 'k'}.pub", "--json"],
            capture_output=True,
            text=True,
            env={**_environ(), "LOCKGEN_HOME": str(home), "NO_COLOR": "1"},
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout), _imported(done.stderr)

    write("n1", "2026-12-01T10:00:00Z")
    first, imported = status()  # the schema made from the models, and kept
    assert "lockgen.model.certificate" in imported and [row["node"] for row in first["rows"]] == ["n1"]
    write("n2", "2026-12-02T10:00:00Z")
    second, imported = status()  # n2 proven by the kept schema
    assert "pydantic_core" in imported and "lockgen.adapters.node.kept_schema" in imported
    assert not {"pydantic", "pydantic.main", "lockgen.model.certificate"} & imported
    third, imported = status()  # every verdict kept
    assert not {"pydantic", "pydantic_core", "lockgen.model.certificate"} & imported

    def dated(report: dict) -> list[dict]:  # a row without its age, which moves between runs
        return [{name: value for name, value in row.items() if name not in ("age", "age_s")} for row in report["rows"]]

    assert [row["node"] for row in third["rows"]] == ["n1", "n2"] and dated(second) == dated(third)
    assert dated(first)[0] == dated(third)[0] and second["numerics"] == third["numerics"]
