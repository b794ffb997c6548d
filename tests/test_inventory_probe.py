"""The inventory probe in a real venv with a real wheel installed by pip, its re-hash, and the whole
conformance check of that venv against the wheel's own RECORD."""

from __future__ import annotations

import ast
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lockgen.adapters.node.inventory_probe import SNIPPET, probe, rehash
from lockgen.adapters.pypi.wheel_record import read_wheel_file
from lockgen.adapters.proof import prefix_observer
from lockgen.core.env.conformance import ExpectedFile, ExpectedPackage, ObservedFile, compare
from lockgen.core.env.wheel_files import Scheme, expected_files
from lockgen.errors import UserError
from tests.test_wheel_record import demo_wheel

pytestmark = pytest.mark.slow  # every test here builds a venv, an image or a registry first

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
SITE = f"lib/python{PY}/site-packages"


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A venv (no pip of its own) with the demo wheel installed into it by pip."""
    root = tmp_path_factory.mktemp("probe")
    wheel = demo_wheel(root)
    prefix = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True, timeout=60)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(prefix / "bin" / "python"),
            "install",
            "--no-deps",
            "--no-index",
            "--no-cache-dir",
            "--disable-pip-version-check",
            "-q",
            str(wheel),
        ],
        check=True,
        timeout=120,
    )
    return prefix, wheel


class _Everything:
    def __contains__(self, _: object) -> bool:
        return True


def observe(prefix: Path) -> list[ObservedFile]:
    """The prefix as lockgen's own observer sees it, every file hashed."""
    return prefix_observer.observe(prefix, _Everything())


def test_snippet_is_stdlib_only():
    tree = ast.parse(SNIPPET.read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert all(n.split(".")[0] in sys.stdlib_module_names for n in names), names


def test_inventory_of_a_pip_install(venv):
    prefix, _ = venv
    inventory = probe(prefix / "bin" / "python")
    assert inventory.site_packages == SITE and inventory.python.startswith(PY)
    (demo,) = inventory.distributions
    assert (demo.key, demo.installer, demo.dist_info) == ("demo 1.0", "pip", f"{SITE}/demo-1.0.dist-info")
    assert demo.wheel_tags == ("py2-none-any", "py3-none-any") and demo.scripts == ("demo-tool",)
    assert demo.direct_url and '"url": "file://' in demo.direct_url
    record = prefix / demo.dist_info / "RECORD"
    assert demo.record_sha256 == hashlib.sha256(record.read_bytes()).hexdigest()
    paths = {r.path for r in demo.record}
    assert {"demo/cli.py", "../../../bin/demo-tool", "../../../bin/demo-sh"} <= paths


def test_rehash_catches_a_record_that_lies(venv, tmp_path):
    prefix, _ = venv
    python = prefix / "bin" / "python"
    clean = rehash(python)
    assert clean.checked >= 5 and clean.mismatches == ()
    target = prefix / SITE / "demo" / "cli.py"
    original = target.read_bytes()
    try:
        target.write_bytes(original + b"# changed\n")
        (prefix / SITE / "demo" / "__init__.py").rename(tmp_path / "init.py")
        found = {(m.path, m.problem) for m in rehash(python).mismatches}
        assert found == {(f"{SITE}/demo/cli.py", "differs"), (f"{SITE}/demo/__init__.py", "missing")}
    finally:
        target.write_bytes(original)
        (tmp_path / "init.py").rename(prefix / SITE / "demo" / "__init__.py")


def test_venv_conforms_to_the_wheels_own_record(venv):
    prefix, wheel = venv
    contents = read_wheel_file(wheel, hashlib.sha256(wheel.read_bytes()).hexdigest())
    rows = expected_files(contents.record, Scheme(SITE, PY, "demo"))
    expected = [
        ExpectedPackage(
            "demo 1.0",
            tuple(ExpectedFile(r.path, r.sha256, r.size) for r in rows),
            dist_info=f"{SITE}/{contents.dist_info}",
            scripts=tuple(s.name for s in contents.scripts),
        )
    ]
    subprocess.run([str(prefix / "bin" / "python"), "-c", "import demo.cli"], check=True, timeout=60)  # writes .pyc
    report = compare(expected, observe(prefix), SITE)
    assert report.clean, report.lines()
    assert {a.rule for a in report.accepted} >= {"pyc", "dist-info", "entry-points", "venv"}
    evil = prefix / SITE / "demo" / "__pycache__" / "evil.cpython-312.pyc"
    evil.write_bytes(b"x")
    try:
        cli = prefix / SITE / "demo" / "cli.py"
        cli.chmod(0o4755)
        lines = compare(expected, observe(prefix), SITE).lines()
        assert lines == (
            f"foreign: {SITE}/demo/__pycache__/evil.cpython-312.pyc",
            f"mode: {SITE}/demo/cli.py is setuid, setgid, sticky, world-writable or carries file capabilities",
        )
    finally:
        evil.unlink()
        cli.chmod(0o644)


def test_uv_venv_conforms_but_for_the_world_writable_lock_uv_leaves(tmp_path):
    wheel = demo_wheel(tmp_path)
    prefix = tmp_path / "uv-venv"
    env = {**os.environ, "UV_CACHE_DIR": str(tmp_path / "uv-cache")}  # nothing left in the user's cache
    subprocess.run(["uv", "venv", "-q", "--python", sys.executable, str(prefix)], check=True, timeout=60, env=env)
    subprocess.run(
        [
            "uv",
            "pip",
            "install",
            "-q",
            "--offline",
            "--no-deps",
            "--python",
            str(prefix / "bin" / "python"),
            str(wheel),
        ],
        check=True,
        timeout=120,
        env=env,
    )
    contents = read_wheel_file(wheel)
    rows = expected_files(contents.record, Scheme(SITE, PY, "demo"))
    expected = [
        ExpectedPackage(
            "demo 1.0",
            tuple(ExpectedFile(r.path, r.sha256, r.size) for r in rows),
            dist_info=f"{SITE}/{contents.dist_info}",
            scripts=("demo-tool",),
        )
    ]
    assert probe(prefix / "bin" / "python").distributions[0].installer == "uv"
    lines = compare(expected, observe(prefix), SITE).lines()  # uv 0.13 leaves `.lock` as 0666; others may not
    assert set(lines) <= {"mode: .lock is setuid, setgid, sticky, world-writable or carries file capabilities"}, lines


def test_probe_errors_are_user_errors(tmp_path):
    with pytest.raises(UserError, match="not found"):
        probe(tmp_path / "no-python")
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho hello\n")
    fake.chmod(0o755)
    with pytest.raises(UserError, match="printed no JSON"):
        probe(fake)


def test_freeze_reads_the_distributions_the_probe_reads(venv, tmp_path):
    """freeze and pin read installed distributions with one reader: pip's wheel installed from a file (its
    direct_url.json records the archive's sha256) becomes a pip entry, a legacy egg-info (a folder, or one
    PKG-INFO file) is listed as importlib.metadata would list it, named unpinnable by the local freeze
    (--skip-unpinnable), and refused for its RECORD by pin and by freeze --python's one-step pin."""
    from lockgen.adapters.lock.lockfile_yaml import load_lock
    from tests.conftest import run_cli

    prefix, wheel = venv
    site = prefix / SITE
    (site / "legacy-0.1.egg-info").mkdir()
    (site / "legacy-0.1.egg-info" / "PKG-INFO").write_text("Metadata-Version: 1.0\nName: legacy\nVersion: 0.1\n")
    (site / "single-2.0.egg-info").write_text("Metadata-Version: 1.0\nName: Single\nVersion: 2.0\n")
    try:
        listed = {d.key: d.record_sha256 for d in probe(prefix / "bin" / "python").distributions}
        assert listed.keys() == {"demo 1.0", "legacy 0.1", "Single 2.0"} and listed["legacy 0.1"] is None
        refused = run_cli(
            "freeze", "--python", str(prefix / "bin" / "python"), "--target", "node", "--out", str(tmp_path / "a.yml")
        )
        # freeze --python inventories and pins in one step: a distribution with no RECORD cannot be pinned
        assert refused.returncode == 1 and "2 distributions have no RECORD" in refused.stderr, refused.stderr
        assert "legacy 0.1, Single 2.0" in refused.stderr and not (tmp_path / "a.yml").exists()
        done = run_cli(
            "freeze",
            "--python",
            str(prefix / "bin" / "python"),
            "--target",
            "node",
            "--out",
            str(tmp_path / "b.yml"),
            "--skip-unpinnable",
        )
        assert done.returncode == 0, done.stderr
        (entry,) = load_lock(tmp_path / "b.yml").package
        assert (entry.name, entry.version, entry.hash.sha256) == (
            "demo",
            "1.0",
            hashlib.sha256(wheel.read_bytes()).hexdigest(),
        )
        assert (
            run_cli(
                "freeze", "--python", str(prefix / "bin" / "python"), "--inventory", str(tmp_path / "inv.json")
            ).returncode
            == 0
        )
        pinned = run_cli("pin", str(tmp_path / "inv.json"), "--target", "node", "--out", str(tmp_path / "c.yml"))
        assert pinned.returncode == 1 and "2 distributions have no RECORD" in pinned.stderr, pinned.stderr
    finally:
        (site / "single-2.0.egg-info").unlink()
        for path in sorted((site / "legacy-0.1.egg-info").iterdir()):
            path.unlink()
        (site / "legacy-0.1.egg-info").rmdir()
