"""explain is the resolver's record: for every target of every example stack under envs/examples whose torch the
rules decide (PyPI's torch or the conda channels' pytorch), the newest release `lockgen explain` admits on each
platform is the release of the torch its committed lock holds (resolve's answer: CI keeps those locks fresh with
`resolve --check`). Offline: PyPI is the stand-in of test_explain (every release the facts know, as pypi.org
serves them), the conda channels the committed snapshot."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from lockgen.adapters.lock.lockfile_yaml import load_lock
from lockgen.api.explain import explain
from lockgen.core.gpu.versions import major_minor
from tests.conftest import REPO
from tests.test_explain import pypi  # noqa: F401 (the stand-in PyPI fixture)

EXAMPLES = REPO / "envs" / "examples"
ALIASES = {"pytorch-cuda": ("conda-forge=" + str(EXAMPLES / "conda-forge-snapshot"),)}
TORCH = {"torch", "pytorch"}


def _cases() -> list[tuple[str, str]]:
    cases = []
    for path in sorted(EXAMPLES.glob("**/stack.toml")):
        stack = tomllib.loads(path.read_text())
        names = set(stack.get("pypi-dependencies", {})) | set(stack.get("dependencies", {}))
        if names & TORCH:
            cases += [(str(path.relative_to(EXAMPLES)), target) for target in stack.get("targets", {})]
    return cases


def _locked(folder: Path, target: str) -> dict[str, str]:
    """{platform: the major.minor of the torch (or pytorch) the committed lock holds there}."""
    lock = load_lock(folder / "locks" / f"{target}.conda-lock.yml")
    return {p.platform: "{}.{}".format(*major_minor(p.version)) for p in lock.package if p.name in TORCH}


def test_the_matrix_covers_every_example_with_torch() -> None:
    assert {stack for stack, _ in _cases()} == {"pytorch-cuda/stack.toml", "torch-pypi/stack.toml"}
    assert len(_cases()) == 11


@pytest.mark.slow
@pytest.mark.parametrize(("stack", "target"), _cases())
def test_explain_admits_the_torch_resolve_locked(tmp_path: Path, pypi, stack: str, target: str) -> None:  # noqa: F811
    url, _ = pypi
    source = EXAMPLES / stack
    path = tmp_path / "stack.toml"  # the example pointed at the stand-in PyPI, beside its committed locks
    text = source.read_text()
    path.write_text(
        text.replace("[pypi-options]\n", f'[pypi-options]\nindex-url = "{url}/simple"\n')
        if "[pypi-options]" in text
        else text
    )
    report = explain(path, target, ALIASES.get(source.parent.name, ()))
    said = {
        platform: ("{}.{}".format(*major_minor(line.split()[1])) if line else None)
        for platform, line in report["newest_admitted"].items()
    }
    assert said == _locked(source.parent, target), report["candidates"][:6]
