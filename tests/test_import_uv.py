"""uv.lock import judged by uv itself: for each choice of extras, groups and Python, the packages lockgen
takes for a platform (plus those it lists as not convertible) are exactly the ones `uv export --frozen`
selects with the same choices, its markers evaluated for that platform. On a lock with `[tool.uv]
conflicts` (cpu/cu128 extras, tests/fixtures/foreign/conflicts) and on the shared corpus's uv.locks."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest

from lockgen.adapters.uv_lock import UvChoices
from lockgen.api.import_lock import import_lock
from lockgen.errors import UserError
from tests.conftest import NEEDS_SHARED, has_shared, run_cli, shared_dir
from tests.uv_oracle import lockgen_takes, uv_selects

CONFLICTS = Path(__file__).parent / "fixtures" / "foreign" / "conflicts"


@pytest.mark.parametrize("flags, choices", [
    ([], UvChoices()),
    (["--extra", "cpu"], UvChoices(extras=("cpu",))),
    (["--extra", "cu128", "--group", "lint"], UvChoices(extras=("cu128",), groups=("lint",))),
    (["--extra", "cu128", "--no-dev"], UvChoices(extras=("cu128",), dev=False)),
    (["--python", "3.12", "--extra", "cpu"], UvChoices(python="3.12", extras=("cpu",))),
])
@pytest.mark.parametrize("platform", ["linux-64", "linux-aarch64"])
def test_a_lock_with_conflicting_cuda_extras_imports_what_uv_installs(tmp_path: Path, flags: list[str],
                                                                     choices: UvChoices, platform: str) -> None:
    project = tmp_path / "project"
    shutil.copytree(CONFLICTS, project)
    python = choices.python or "3.10"
    expected = uv_selects(project, flags, platform, python)
    assert lockgen_takes(project / "uv.lock", choices, platform, tmp_path / "t.yml") == expected
    assert ("colorama", "0.4.6") not in expected  # win32 only
    assert (("tomli", "2.5.0") in expected) == (python == "3.10")  # python < 3.11 only


def test_conflicting_extras_and_unknown_choices_are_refused_with_what_exists(tmp_path: Path) -> None:
    source = CONFLICTS / "uv.lock"
    with pytest.raises(UserError, match=r"`trainer\[cpu\]` and `trainer\[cu128\]` conflicting") as raised:
        import_lock(source, "t", None, tmp_path / "t.yml", UvChoices(extras=("cpu", "cu128")))
    assert raised.value.hint == "choose one, e.g. --extra cpu"
    with pytest.raises(UserError, match="no extra gpu"):
        import_lock(source, "t", None, tmp_path / "t.yml", UvChoices(extras=("gpu",)))
    with pytest.raises(UserError, match="no dependency group docs"):
        import_lock(source, "t", None, tmp_path / "t.yml", UvChoices(groups=("docs",)))
    outside = run_cli("import", str(source), "--target", "t", "--out", str(tmp_path / "t.yml"), "--python", "3.9")
    assert outside.returncode == 1 and "outside the lock's requires-python `>=3.10`" in outside.stderr
    assert "hint: pass one of: 3.10, 3.11" in outside.stderr and not (tmp_path / "t.yml").exists()
    chosen = run_cli("import", str(source), "--target", "t", "--out", str(tmp_path / "t.yml"), "--extra", "cu128")
    assert chosen.returncode == 0, chosen.stderr


CORPUS_UV = sorted(shared_dir().glob("corpus/*uv.lock")) if has_shared() else []


@pytest.mark.skipif(not has_shared(), reason=NEEDS_SHARED)
@pytest.mark.parametrize("source", CORPUS_UV, ids=lambda p: p.name[:30])
@pytest.mark.parametrize("platform, python", [("linux-64", "3.11"), ("linux-aarch64", "3.12"), ("linux-64", "3.13")])
def test_the_shared_uv_locks_import_what_uv_installs(tmp_path: Path, source: Path, platform: str, python: str) -> None:
    data = tomllib.loads(source.read_text())
    root = next(p for p in data["package"] if "editable" in p["source"] or "virtual" in p["source"])
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(source, project / "uv.lock")
    (project / "pyproject.toml").write_text(f'[project]\nname = "{root["name"]}"\nversion = "0"\n'
                                            f'requires-python = "{data["requires-python"]}"\n')
    expected = uv_selects(project, ["--python", python], platform, python)
    taken = lockgen_takes(project / "uv.lock", UvChoices(python=python), platform, tmp_path / "t.yml")
    assert taken == expected, (sorted(taken - expected), sorted(expected - taken))
