"""`--json` on every command that reports: one JSON document on stdout with the documented keys
(docs/reference/json.md), progress on stderr only, and the same exit codes as the text output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli
from tests.test_export import make_lock

H200 = REPO / "envs" / "examples" / "h200-system"


def _json(*args: str, env: dict[str, str] | None = None, code: int = 0) -> object:
    result = run_cli(*args, env=env)
    assert result.returncode == code, result.stderr
    return json.loads(result.stdout)


@pytest.mark.slow
def test_materialize_check_export_and_envs(tmp_path: Path) -> None:
    env = {"LOCKGEN_HOME": str(tmp_path / "home")}
    lock = make_lock(tmp_path, "1.0")
    made = _json("materialize", str(lock), "--prefix", str(tmp_path / "env"), "--json", env=env)
    assert set(made) == {"prefix", "environment_digest", "lock"} and len(made["environment_digest"]) == 64
    checked = _json("check", "--prefix", made["prefix"], "--json", env=env)
    assert checked["clean"] and set(checked) >= {"prefix", "missing", "extra", "modified", "unsafe", "full"}
    (Path(made["prefix"]) / "lib" / "libfoo.txt").write_text("changed\n")
    drifted = _json("check", "--prefix", made["prefix"], "--json", env=env, code=1)
    assert drifted["modified"] == ["lib/libfoo.txt"] and not drifted["clean"]
    exported = _json("export", str(lock), "--out", str(tmp_path / "img"), "--json", env=env)
    assert set(exported) == {"image_digest", "environment_digest", "out", "format"}
    image = _json("check", "--image", str(tmp_path / "img"), "--json", env=env)
    assert (
        image["clean"]
        and image["recorded_environment"] == image["recomputed_environment"] == exported["environment_digest"]
    )
    listed = _json("envs", "--json", env=env)
    assert listed == [] or all(set(e) == {"prefix", "environment_digest", "lock_sha256", "platform"} for e in listed)


@pytest.mark.slow
def test_import_certs_cert_verify_and_compare(tmp_path: Path) -> None:
    imported = _json(
        "import",
        str(REPO / "tests" / "fixtures" / "foreign" / "tiny.pixi.lock"),
        "--target",
        "t",
        "--out",
        str(tmp_path / "t.yml"),
        "--json",
    )
    assert imported["platforms"] == {"linux-64": {"conda": 2, "pip": 1}} and imported["skipped"] == []
    listed = _json("certs", str(H200), "--json")
    assert listed and all({"certificate", "created", "arch", "passed", "gpus"} <= set(c) for c in listed)
    checked = _json(
        "cert", "verify", str(H200 / "h200-full.cert.json"), "--key", str(H200 / "h200-signing.pub"), "--json"
    )
    assert checked["checked"] == "signature valid" and checked["passed"] and checked["failed"] == []
    degraded = _json(
        "cert",
        "verify",
        str(H200 / "degraded-cudnn-off.cert.json"),
        "--key",
        str(H200 / "h200-signing.pub"),
        "--json",
        code=1,
    )
    assert any("conv_bf16_floor" in line for line in degraded["failed"])
    compared = _json(
        "cert",
        "compare",
        str(H200 / "h200-full.cert.json"),
        str(H200 / "h200-quick.cert.json"),
        "--json",
        "--noise",
        "1",
        code=1,
    )  # the quick run made fewer figures: each one it lacks is a difference
    rows = compared["figures"]
    assert all(set(r) == {"name", "unit", "old", "new", "change", "regression", "missing"} for r in rows)
    assert {r["missing"] for r in rows} == {None, "new"}
    assert compared["numerics"] == {
        "differing": [],
        "cause": "",
        "note": "no fingerprint in A and B (certified before lockgen computed one): not compared",
    }


@pytest.mark.slow
def test_verify_json(tmp_path: Path) -> None:
    done = _json("verify", "--arch", "cpu", "--quick", "--out", str(tmp_path / "c.cert.json"), "--json")
    assert done["passed"] and done["failed"] == [] and done["certificate"] == str(tmp_path / "c.cert.json")
    assert "graphs/bf16_replay_step_ms" in done["not_run"]


def _keys_sorted(document: object) -> bool:
    """Whether every object in `document`, at any depth, lists its keys sorted."""
    if isinstance(document, dict):
        return list(document) == sorted(document) and all(_keys_sorted(v) for v in document.values())
    if isinstance(document, list):
        return all(_keys_sorted(v) for v in document)
    return True


def test_every_json_document_has_sorted_keys(tmp_path: Path) -> None:
    """One renderer for every `--json` (terminal.print_json, sorted keys): no command prints JSON of its own."""
    own = [
        f"{path.name}:{number}"
        for path in sorted((REPO / "lockgen" / "cli").glob("*.py"))
        if path.name != "terminal.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "json.dumps(" in line
    ]
    assert own == []
    quickstart = REPO / "envs" / "examples" / "quickstart"
    locks = quickstart / "locks"
    documents = [
        _json("arch", "--json"),
        _json("arch", "sm90", "--json"),
        _json("diff", str(locks / "cpu-el7.conda-lock.yml"), str(locks / "cpu.conda-lock.yml"), "--json", code=1),
        _json("resolve", str(quickstart / "stack.toml"), "--check", "--json"),
    ]
    assert all(_keys_sorted(document) for document in documents)
    assert any(isinstance(d, dict) and d.get("changes") for d in documents)


@pytest.mark.parametrize("case", ["missing", "not a lock", "a stack"])
def test_diff_exits_2_on_trouble(tmp_path: Path, case: str) -> None:
    """GNU diff's convention: 0 the same, 1 they differ, 2 trouble, so a script can tell a difference from a typo."""
    good = REPO / "envs" / "examples" / "quickstart" / "locks" / "cpu.conda-lock.yml"
    bad = {
        "missing": tmp_path / "nope.conda-lock.yml",
        "not a lock": tmp_path / "x.conda-lock.yml",
        "a stack": REPO / "envs" / "examples" / "quickstart" / "stack.toml",
    }[case]
    if case == "not a lock":
        bad.write_text("garbage: [\n")
    for args in ([str(bad), str(good)], [str(good), str(bad)], [str(bad), str(good), "--exit-zero"]):
        result = run_cli("diff", *args)
        assert result.returncode == 2 and result.stderr.startswith("error:") and "Traceback" not in result.stderr, (
            result.stderr
        )
    assert run_cli("diff", str(good), str(good)).returncode == 0
