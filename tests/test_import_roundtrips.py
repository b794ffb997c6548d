"""Conda-side and PEP 751 imports as their own tools write the files: an @EXPLICIT file rendered by
conda-lock itself (its `# pip NAME @ URL#sha256=` lines imported with their hashes, an sdist listed as
left out), a conda-lock.yml whose pip entries include an sdist, a pixi environment without a Linux
platform refused naming the platforms it has, a pixi pypi entry without a hash listed, and a PEP 751 file
known by its content under any name."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from lockgen.adapters.lock.lockfile_yaml import load_lock
from lockgen.model.requests import ImportOptions
from lockgen.api.import_lock import import_lock
from tests.conftest import run_cli

FOREIGN = Path(__file__).parent / "fixtures" / "foreign"
SIX = "https://files.pythonhosted.org/packages/b7/ce/149a00dd41f10bc29e5921b496af8b574d8413afcd5e30dfa0ed46c2cc5e/six-1.17.0-py2.py3-none-any.whl"
ORJSON = "https://files.pythonhosted.org/packages/source/o/orjson/orjson-3.10.0.tar.gz"
CONDA_LOCK = {
    "version": 1,
    "metadata": {
        "content_hash": {"linux-64": "0" * 64},
        "channels": [{"url": "conda-forge", "used_env_vars": []}],
        "platforms": ["linux-64"],
        "sources": ["environment.yml"],
    },
    "package": [
        {
            "name": "zlib",
            "version": "1.3.1",
            "manager": "conda",
            "platform": "linux-64",
            "dependencies": {},
            "url": "https://conda.anaconda.org/conda-forge/linux-64/zlib-1.3.1-hb9d3cd8_2.conda",
            "hash": {"md5": "b" * 32, "sha256": "a" * 64},
            "category": "main",
            "optional": False,
        },
        {
            "name": "six",
            "version": "1.17.0",
            "manager": "pip",
            "platform": "linux-64",
            "dependencies": {},
            "url": SIX,
            "hash": {"sha256": "c" * 64},
            "category": "main",
            "optional": False,
        },
        {
            "name": "orjson",
            "version": "3.10.0",
            "manager": "pip",
            "platform": "linux-64",
            "dependencies": {},
            "url": ORJSON,
            "hash": {"sha256": "d" * 64},
            "category": "main",
            "optional": False,
        },
    ],
}


@pytest.fixture
def conda_lock_file(tmp_path: Path) -> Path:
    path = tmp_path / "conda-lock.yml"
    path.write_text(yaml.safe_dump(CONDA_LOCK))
    return path


@pytest.mark.slow
def test_an_explicit_file_conda_lock_renders_brings_its_pip_lines_with_hashes(
    tmp_path: Path, conda_lock_file: Path
) -> None:
    from conda_lock.conda_lock import render_lockfile_for_platform
    from conda_lock.lockfile import parse_conda_lock_file

    lines = render_lockfile_for_platform(
        lockfile=parse_conda_lock_file(conda_lock_file),
        include_dev_dependencies=True,
        extras=None,
        kind="explicit",
        platform="linux-64",
        suppress_warning_for_pip_and_explicit=True,
    )
    explicit = tmp_path / "conda-linux-64.lock"
    explicit.write_text("\n".join(lines) + "\n")
    assert f"# pip six @ {SIX}#sha256={'c' * 64}" in explicit.read_text()
    _, lock = import_lock(explicit, "t", tmp_path / "t.yml")
    pip = [(p.name, p.version, p.url, p.hash.sha256) for p in lock.package if p.manager == "pip"]
    assert pip == [("six", "1.17.0", SIX, "c" * 64)]
    assert [p.name for p in lock.package if p.manager == "conda"] == ["zlib"]
    assert lock.meta("skipped") == (
        "linux-64: `orjson` is an sdist (it would be built on install): orjson-3.10.0.tar.gz; lockgen locks wheels only"
    )
    assert load_lock(tmp_path / "t.yml") == lock


@pytest.mark.slow
def test_a_conda_lock_sdist_pip_entry_is_listed_not_locked(tmp_path: Path, conda_lock_file: Path) -> None:
    _, lock = import_lock(conda_lock_file, "t", tmp_path / "t.yml")
    assert sorted(p.name for p in lock.package) == ["six", "zlib"]
    assert "linux-64: `orjson` 3.10.0 is an sdist (it would be built on install)" in lock.meta("skipped")
    rendered = run_cli("render", str(tmp_path / "t.yml"), "--format", "pylock", "-o", str(tmp_path / "pylock.toml"))
    assert rendered.returncode == 0 and "orjson" not in (tmp_path / "pylock.toml").read_text()


@pytest.mark.slow
def test_a_pixi_environment_without_linux_is_refused_naming_its_platforms(tmp_path: Path) -> None:
    text = (FOREIGN / "tiny.pixi.lock").read_text()
    text = text.replace(
        "      linux-64:\n      - conda: https://conda.anaconda.org/conda-forge/linux-64/zlib-1.3.1-hb9d3cd8_2.conda\n",
        "      osx-arm64:\n",
    )
    source = tmp_path / "pixi.lock"
    source.write_text(text)
    done = run_cli("import", str(source), "-t", "t", "-o", str(tmp_path / "t.yml"))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "error: `" in done.stderr and "holds no Linux platform (it has osx-arm64)" in done.stderr
    assert "hint: lock it for linux-64 or linux-aarch64" in done.stderr and not (tmp_path / "t.yml").exists()


def test_a_pep751_file_is_known_by_its_content(tmp_path: Path) -> None:
    renamed = tmp_path / "requirements-lock.toml"
    shutil.copy(FOREIGN / "pylock.tiny.toml", renamed)
    _, lock = import_lock(renamed, "t", tmp_path / "t.yml", ImportOptions())
    _, named = import_lock(FOREIGN / "pylock.tiny.toml", "t", tmp_path / "u.yml", ImportOptions())
    assert lock.meta("imported-format").startswith("pylock.toml (PEP 751")
    assert [(p.name, p.url) for p in lock.package] == [(p.name, p.url) for p in named.package]


def test_a_package_listed_twice_is_imported_once_or_refused(tmp_path: Path) -> None:
    """An @EXPLICIT file naming one archive twice was imported as a lock naming it twice, which lockgen then
    refused to read (found by an attack battery): an exact repeat is kept once, as conda installs it once;
    two builds of one name are refused, and nothing is written."""
    line = "https://conda.anaconda.org/conda-forge/linux-64/bzip2-1.0.8-hda65f42_{build}.conda#d2ffd7602c02f2b316fd921d39876885\n"
    twice, builds = tmp_path / "twice.txt", tmp_path / "builds.txt"
    twice.write_text("# platform: linux-64\n@EXPLICIT\n" + line.format(build=9) * 2)
    builds.write_text("# platform: linux-64\n@EXPLICIT\n" + line.format(build=9) + line.format(build=10))
    _, lock = import_lock(twice, "cpu", out=tmp_path / "twice.conda-lock.yml")
    assert [p.name for p in lock.package] == ["bzip2"]
    assert [p.name for p in load_lock(tmp_path / "twice.conda-lock.yml").package] == ["bzip2"]
    refused = run_cli("import", str(builds), "-t", "cpu", "-o", str(tmp_path / "builds.conda-lock.yml"))
    assert (
        refused.returncode == 1
        and "bzip2 twice" in refused.stderr
        and "hda65f42_9 and 1.0.8 hda65f42_10" in refused.stderr
    ), refused.stderr
    assert not (tmp_path / "builds.conda-lock.yml").exists()
    # one version from two places: the message tells them apart by their files, not "1.0.8 and 1.0.8"
    moved = tmp_path / "moved.txt"
    moved.write_text(
        "# platform: linux-64\n@EXPLICIT\n"
        + line.format(build=9)
        + line.format(build=9)
        .replace("/linux-64/", "/linux-64/mirror/")
        .replace("hda65f42_9.conda", "hda65f42_9.tar.bz2")
    )
    refused = run_cli("import", str(moved), "-t", "cpu", "-o", str(tmp_path / "moved.conda-lock.yml"))
    assert refused.returncode == 1 and "from bzip2-1.0.8-hda65f42_9.conda and 1.0.8 hda65f42_9" not in refused.stderr
    assert "1.0.8 from bzip2-1.0.8-hda65f42_9.conda and 1.0.8 from bzip2-1.0.8-hda65f42_9.tar.bz2" in refused.stderr, (
        refused.stderr
    )


def test_no_writer_writes_a_lock_naming_a_package_twice(tmp_path: Path) -> None:
    """The rule has one home, the check every lock passes before a byte is written (pin wrote an inventory's
    distribution listed twice) and after it is read."""
    from lockgen.adapters.lock.lockfile_yaml import checked_lock_text
    from lockgen.errors import LockFormatError

    lock = load_lock(
        Path(__file__).resolve().parent.parent / "envs" / "examples" / "quickstart" / "locks" / "cpu.conda-lock.yml"
    )
    doubled = replace(lock, package=(*lock.package, lock.package[0]))
    with pytest.raises(LockFormatError, match="twice"):
        checked_lock_text(doubled, "a writer", "mend the writer's input")
