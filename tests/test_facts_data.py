"""The packaged GPU facts are exactly the sourced matrix in the shared folder re-expressed, plus the sourced
additions and corrections in tests/facts_additions.json; every fact keeps its sources."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from lockgen.core.gpu.facts import load_facts
from lockgen.model.records import record_document
from tests.conftest import REPO, shared_dir
from tests.facts_conversion import packaged


def test_packaged_facts_derive_from_the_shared_matrix_and_the_sourced_additions() -> None:
    shipped = json.loads((REPO / "lockgen" / "data" / "gpu_facts.json").read_text())
    assert packaged(shared_dir() / "reference" / "gpu-matrix.json") == shipped


def test_every_fact_keeps_its_sources() -> None:
    facts = load_facts()
    assert all(a.sources for a in facts.archs.values())
    assert all(t.sources for t in facts.cuda_toolkits.values())
    assert all(e.sources for e in facts.conda_forge_pytorch_arch_lists)


def test_the_packaged_facts_are_validated_once_per_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The packaged GPU facts the models accepted are kept (`kept_inputs.gpu_facts`) and taken back by the next
    command without validating them, equal to what was accepted and dumped alike, and every later `load_facts` in
    that command takes the same; facts a `$LOCKGEN_FACTS` file states are validated by every command. Failed before:
    every resolve validated the packaged facts (about 150 models) again."""
    from lockgen.adapters.lock import kept_inputs
    from lockgen.core.gpu import facts
    from lockgen.core.gpu.package_data import PACKAGED_FACTS, load_json

    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    for name in ("LOCKGEN_FACTS", "LOCKGEN_REPARSE"):
        monkeypatch.delenv(name, raising=False)
    validated: list[str] = []
    parse = facts._parsed
    monkeypatch.setattr(facts, "_parsed", lambda origin, raw: validated.append(origin) or parse(origin, raw))
    monkeypatch.setattr(facts, "_PARSED", {})
    first = kept_inputs.gpu_facts()
    assert validated == [PACKAGED_FACTS]
    monkeypatch.setattr(facts, "_PARSED", {})  # the next command
    again = kept_inputs.gpu_facts()
    assert validated == [PACKAGED_FACTS] and again == first and record_document(again) == record_document(first)
    assert facts.load_facts() is again
    stated = tmp_path / "facts.json"
    stated.write_text(json.dumps(load_json("gpu_facts.json")))
    monkeypatch.setenv("LOCKGEN_FACTS", str(stated))
    for _ in range(2):
        monkeypatch.setattr(facts, "_PARSED", {})
        assert kept_inputs.gpu_facts().archs == first.archs
    assert validated == [PACKAGED_FACTS, str(stated), str(stated)]


def test_an_override_spelled_as_the_packaged_file_s_path_is_read_as_the_override(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`LOCKGEN_FACTS=lockgen/data/gpu_facts.json` from a checkout names that file, edited or not: it is read and
    validated, never taken for the kept packaged facts, within a command or after one (review of resolvecut: failed
    before, the kept packaged facts were returned, dated as the package's)."""
    from lockgen.adapters.lock import kept_inputs
    from lockgen.core.gpu import facts
    from lockgen.core.gpu.package_data import PACKAGED_FACTS, load_json

    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    for name in ("LOCKGEN_FACTS", "LOCKGEN_REPARSE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(facts, "_PARSED", {})
    packaged_facts = kept_inputs.gpu_facts()  # kept, and remembered for this process
    edited = load_json("gpu_facts.json")
    edited["valid_as_of"] = "2001-01-01"
    checkout = tmp_path / "checkout"
    (checkout / "lockgen" / "data").mkdir(parents=True)
    (checkout / PACKAGED_FACTS).write_text(json.dumps(edited))
    monkeypatch.chdir(checkout)
    monkeypatch.setenv("LOCKGEN_FACTS", PACKAGED_FACTS)
    assert str(kept_inputs.gpu_facts().valid_as_of) == "2001-01-01"  # in the same process
    monkeypatch.setattr(facts, "_PARSED", {})  # the next command
    assert str(kept_inputs.gpu_facts().valid_as_of) == "2001-01-01" != str(packaged_facts.valid_as_of)
    assert str(facts.load_facts().valid_as_of) == "2001-01-01"


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda raw: raw["archs"]["sm90"].update(name="sm999"), "the entry of `sm90` names `name`, which its key"),
        (lambda raw: next(iter(raw["cuda_toolkits"].values())).update(version="99.9"), "names `version`"),
        (
            lambda raw: next(iter(next(iter(raw["pytorch_official_aarch64_arch_lists"].values())).values())).update(
                platform="linux-64"
            ),
            "names `platform`, which its key gives",
        ),
        (lambda raw: raw["archs"]["sm90"].update(unknown=1), "`archs.sm90.unknown`"),
    ],
    ids=["arch-name", "toolkit-version", "aarch64-platform", "unknown-key"],
)
def test_a_stated_facts_entry_is_refused_where_it_names_what_its_key_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edit: Callable[[dict], object], expected: str
) -> None:
    """An entry's key gives its arch name, toolkit version, torch/tag/platform: an entry naming one itself is
    refused (an aarch64 arch list is never made a linux-64 one by its entry), and a refusal names the place."""
    from lockgen.core.gpu import facts
    from lockgen.core.gpu.package_data import load_json
    from lockgen.errors import UserError

    raw = json.loads(json.dumps(load_json("gpu_facts.json")))  # a copy: the packaged document is cached
    edit(raw)
    stated = tmp_path / "facts.json"
    stated.write_text(json.dumps(raw))
    monkeypatch.setenv("LOCKGEN_FACTS", str(stated))
    monkeypatch.setattr(facts, "_PARSED", {})
    with pytest.raises(UserError) as refused:
        facts.load_facts()
    assert "does not follow the facts schema" in str(refused.value) and expected in str(refused.value)
