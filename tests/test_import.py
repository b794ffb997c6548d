"""`lockgen import` on every file of the shared corpus of real public locks: each imports (or fails with
a message saying what is unsupported), conda-lock reads the result, hashes and platforms are kept."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from lockgen.adapters.lock.lockfile_yaml import load_lock
from lockgen.model.requests import ImportOptions
from lockgen.api.import_lock import import_lock
from lockgen.errors import LockgenError
from tests.conftest import NEEDS_SHARED, has_shared, run_cli, shared_dir

if not has_shared():
    pytest.skip(NEEDS_SHARED, allow_module_level=True)
CORPUS = sorted(p for p in (shared_dir() / "corpus").iterdir() if p.name != "README.md")
ENVIRONMENT = {"prefix-dev__pixi__examples__pytorch__pixi.lock": "pytorch-channel"}


@pytest.mark.slow
@pytest.mark.parametrize("source", CORPUS, ids=lambda p: p.name[:40])
def test_every_corpus_lock_imports(source: Path, tmp_path: Path) -> None:
    from conda_lock.lockfile import parse_conda_lock_file

    out = tmp_path / "imported.conda-lock.yml"
    path, lock = import_lock(source, "t", out, ImportOptions(environment=ENVIRONMENT.get(source.name)))
    assert path == out and lock.package
    assert all(p.hash.sha256 or p.hash.md5 for p in lock.package)
    assert parse_conda_lock_file(out).package
    assert load_lock(out) == lock
    assert "linux-64" in lock.metadata.platforms


@pytest.mark.slow
def test_conda_lock_import_keeps_every_entry(tmp_path: Path) -> None:
    source = next(p for p in CORPUS if p.name.startswith("pangeo") and p.name.endswith("conda-lock.yml"))
    original = yaml.safe_load(source.read_text())["package"]
    _, lock = import_lock(source, "t", tmp_path / "x.yml")
    assert len(lock.package) == len(original)
    assert {(p["name"], p["platform"], p["hash"].get("sha256")) for p in original} == {
        (p.name, p.platform, p.hash.sha256) for p in lock.package
    }


def test_explicit_import_keeps_urls_and_md5(tmp_path: Path) -> None:
    source = next(p for p in CORPUS if p.name.endswith("conda-linux-64.lock"))
    lines = [line for line in source.read_text().splitlines() if line.startswith("https://")]
    _, lock = import_lock(source, "t", tmp_path / "x.yml")
    assert sorted(f"{p.url}#{p.hash.md5}" for p in lock.package) == sorted(lines)


def test_uv_lock_picks_the_linux_wheel_for_the_python(tmp_path: Path) -> None:
    source = next(p for p in CORPUS if p.name == "Clay-foundation__model__uv.lock")
    _, lock = import_lock(source, "t", tmp_path / "x.yml", ImportOptions(python="3.11"))
    torch = {p.platform: p.url.rsplit("/", 1)[-1] for p in lock.package if p.name == "torch"}
    assert torch["linux-64"].endswith("cp311-cp311-manylinux_2_28_x86_64.whl")
    assert torch["linux-aarch64"].endswith("cp311-cp311-manylinux_2_28_aarch64.whl")
    assert not any(p.name.startswith("pywin32") for p in lock.package)
    assert "claymodel" in lock.meta("skipped")


@pytest.mark.slow
def test_unsupported_input_fails_cleanly(tmp_path: Path) -> None:
    text_file = tmp_path / "notes.txt"
    text_file.write_text("just: [some, yaml]\n")
    with pytest.raises(LockgenError, match="not a lock format"):
        import_lock(text_file, "t", tmp_path / "x.yml")
    empty_env = next(p for p in CORPUS if p.name in ENVIRONMENT)
    result = run_cli("import", str(empty_env), "--target", "t", "--out", str(tmp_path / "y.yml"))
    assert result.returncode == 1 and "holds no packages" in result.stderr and "--environment" in result.stderr
    assert not (tmp_path / "x.yml").exists() and not (tmp_path / "y.yml").exists()


@pytest.mark.slow
def test_pixi_v7_platform_virtual_packages_come_over(tmp_path: Path) -> None:
    source = next(p for p in CORPUS if p.name.startswith("data-apis__array-api-extra"))
    _, lock = import_lock(source, "t", tmp_path / "x.yml", ImportOptions(environment="tests-cuda"))
    assert "__cuda=12.9" in lock.meta("virtual-packages.linux-64").split()
    assert "is a local path, built from source" in lock.meta("skipped")
    _, plain = import_lock(source, "t", tmp_path / "y.yml")
    assert "__cuda" not in plain.meta("virtual-packages.linux-64")


@pytest.mark.slow
@pytest.mark.parametrize("cut", [3000, 60000])
def test_a_truncated_pixi_lock_is_named_as_such(tmp_path: Path, cut: int) -> None:
    source = next(p for p in CORPUS if p.name.startswith("data-apis__array-api-extra"))
    truncated = tmp_path / "pixi.lock"
    truncated.write_bytes(source.read_bytes()[:cut])
    result = run_cli("import", str(truncated), "--target", "t", "--out", str(tmp_path / "x.yml"))
    assert result.returncode == 1 and "truncated" in result.stderr and "hint:" in result.stderr
    assert not (tmp_path / "x.yml").exists()
