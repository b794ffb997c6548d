"""The packaged GPU facts are exactly the sourced matrix in the shared folder re-expressed, plus the sourced
additions and corrections in tests/facts_additions.json; every fact keeps its sources."""

from __future__ import annotations

import json

from lockgen.core.gpu.facts import load_facts
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
