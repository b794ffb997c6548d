"""Conformance end to end, against the packages' own hashes: a venv made with plain `pip install` of PyPI
wheels is frozen on the "node" (`freeze --inventory`, no network), pinned to PyPI's wheels (`pin`), and
proven (`check --lock`); each kind of tampering fails naming the package; the offline bundle works with
the network cut; `verify --lock` refuses an environment that is not its lock; a tampered package cache is
caught and extracted again; a forged image is refused whatever its labels say."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lockgen.adapters.store import env_manifest
from lockgen.adapters.lock.lockfile_yaml import dump_lock, load_lock
from lockgen.api.check import check_lock
from lockgen.model.requests import ExportRequest, Prefix
from lockgen.api.export import BuiltTree, _write_image
from lockgen.api.materialize import materialize
from lockgen.digests import file_digest
from lockgen.core.lock import lock_builder
from lockgen.errors import UserError
from lockgen.model.lock import LockedPackage, PackageHash
from tests.conftest import run_cli
from tests.test_export import make_lock

pytestmark = pytest.mark.slow  # every test here builds a venv, an image or a registry first

TAG = sys.implementation.cache_tag
SITE = f"lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"
DEAD_PROXY = {
    "http_proxy": "http://127.0.0.1:9",
    "https_proxy": "http://127.0.0.1:9",
    "HTTP_PROXY": "http://127.0.0.1:9",
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "no_proxy": "",
}


@pytest.fixture(scope="module")
def pinned_venv(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(venv, lock, bundle): `pip install six idna` from PyPI, inventoried and pinned."""
    root = tmp_path_factory.mktemp("pinned")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "-q",
            "--no-cache-dir",
            "--index-url",
            "https://pypi.org/simple",
            "six==1.17.0",
            "idna==3.10",
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    home = {"LOCKGEN_HOME": str(root / "home")}
    assert (
        run_cli(
            "freeze", "--python", str(venv / "bin" / "python"), "--inventory", str(root / "inv.json"), env=home
        ).returncode
        == 0
    )
    pinned = run_cli(
        "pin",
        str(root / "inv.json"),
        "--target",
        "node",
        "--out",
        str(root / "locks" / "node.conda-lock.yml"),
        env=home,
    )
    assert pinned.returncode == 0, pinned.stderr
    return venv, root / "locks" / "node.conda-lock.yml", root / "locks" / "node.manifests.json.gz"


@pytest.mark.network
def test_a_pip_venv_is_pinned_to_pypi_and_proven(pinned_venv: tuple[Path, Path, Path], tmp_path: Path) -> None:
    venv, lock, _ = pinned_venv
    packages = {p.name: p for p in load_lock(lock).package}
    assert set(packages) == {"six", "idna"}
    assert all(
        p.url.startswith("https://files.pythonhosted.org/") and len(p.hash.sha256 or "") == 64
        for p in packages.values()
    )
    checked = run_cli(
        "check",
        "--lock",
        str(lock),
        "--python",
        str(venv / "bin" / "python"),
        "--json",
        env={"LOCKGEN_HOME": str(tmp_path / "home")},
    )
    assert checked.returncode == 0, checked.stderr
    assert json.loads(checked.stdout)["clean"] is True


@pytest.mark.network
@pytest.mark.network
def test_freeze_python_inventories_and_pins_in_one_step(pinned_venv: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """On a connected machine `freeze --python` is `freeze --inventory` then `pin`, without the file between:
    the same wheels at the same hashes, and the environment proven against the lock."""
    venv, two_steps, _ = pinned_venv
    lock = tmp_path / "locks" / "node.conda-lock.yml"
    done = run_cli(
        "freeze",
        "--python",
        str(venv / "bin" / "python"),
        "--target",
        "node",
        "--out",
        str(lock),
        "--json",
        env={"LOCKGEN_HOME": str(tmp_path / "home")},
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "lock": str(lock),
        "manifests": str(tmp_path / "locks" / "node.manifests.json.gz"),
        "packages": 2,
        "target": "node",
    }
    assert list(json.loads(done.stdout)) == sorted(json.loads(done.stdout))
    assert load_lock(lock).package == load_lock(two_steps).package
    checked = run_cli("check", "--lock", str(lock), "--python", str(venv / "bin" / "python"))
    assert checked.returncode == 0, checked.stderr


@pytest.mark.network
def test_a_pin_refused_at_the_end_writes_neither_lock_nor_manifests(
    pinned_venv: tuple[Path, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The manifests bundle was written before the lock's fields were checked: a refused pin left it behind."""
    from lockgen.api import pin as pin_use_case
    from lockgen.errors import LockFieldError

    def refused(lock: object, source: str, fix: str) -> str:
        raise LockFieldError(f"lock `{source}`: a field breaks its rule", fix)

    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(pin_use_case, "checked_lock_text", refused)
    inventory = pinned_venv[1].parent.parent / "inv.json"
    out = tmp_path / "locks" / "node.conda-lock.yml"
    with pytest.raises(LockFieldError) as error:
        pin_use_case.pin(inventory, "node", out, "https://pypi.org/simple", False, (), lambda _: None)
    assert "inventory" in error.value.hint
    assert not out.parent.exists() or list(out.parent.iterdir()) == []


@pytest.mark.parametrize(
    "tamper, expected",
    [
        (lambda v: (v / SITE / "six.py").write_text("print('changed')\n"), "six 1.17.0: modified six.py"),
        (
            lambda v: (
                (v / SITE / "__pycache__").mkdir(exist_ok=True)
                or (v / SITE / "__pycache__" / f"evil.{TAG}.pyc").write_bytes(b"\0")
            ),
            "foreign: " + SITE + f"/__pycache__/evil.{TAG}.pyc",
        ),
        (lambda v: os.chmod(v / SITE / "idna" / "core.py", 0o4755), "mode: " + SITE + "/idna/core.py"),
        (lambda v: shutil.rmtree(v / SITE / "idna"), "idna 3.10: missing"),
    ],
)
def test_each_tampering_fails_naming_the_package(
    pinned_venv: tuple[Path, Path, Path], tmp_path: Path, tamper, expected
) -> None:
    venv, lock, bundle = pinned_venv
    copy = tmp_path / "venv"
    shutil.copytree(venv, copy, symlinks=True)
    tamper(copy)
    checked = run_cli(
        "check",
        "--lock",
        str(lock),
        "--prefix",
        str(copy),
        "--manifests",
        str(bundle),
        env={"LOCKGEN_HOME": str(tmp_path / "home")},
    )
    assert checked.returncode == 1
    assert any(line.startswith(expected) for line in checked.stdout.splitlines()), checked.stdout
    assert "error:" in checked.stderr and "Traceback" not in checked.stderr


@pytest.mark.network
def test_the_offline_bundle_needs_no_network(pinned_venv: tuple[Path, Path, Path], tmp_path: Path) -> None:
    venv, lock, bundle = pinned_venv
    offline = {"LOCKGEN_HOME": str(tmp_path / "empty-home"), **DEAD_PROXY}
    with_bundle = run_cli("check", "--lock", str(lock), "--prefix", str(venv), "--manifests", str(bundle), env=offline)
    assert with_bundle.returncode == 0, with_bundle.stderr
    without = run_cli("check", "--lock", str(lock), "--prefix", str(venv), env=offline)
    assert without.returncode == 1 and "error: GET https://files.pythonhosted.org" in without.stderr


@pytest.mark.network
def test_verify_refuses_an_environment_that_is_not_its_lock(
    pinned_venv: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    _, lock, bundle = pinned_venv
    other = tmp_path / "other"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(other)], check=True)
    refused = run_cli(
        "verify",
        "--arch",
        "cpu",
        "--quick",
        "--lock",
        str(lock),
        "--manifests",
        str(bundle),
        "--python",
        str(other / "bin" / "python"),
        "--out",
        str(tmp_path / "c.cert.json"),
        env={"LOCKGEN_HOME": str(tmp_path / "home")},
    )
    assert refused.returncode == 1
    assert "is not the environment of" in refused.stderr and "missing package" in refused.stderr
    assert not (tmp_path / "c.cert.json").exists()


def test_a_tampered_package_cache_is_extracted_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    lock = make_lock(tmp_path, "1.0")
    first, _ = materialize(lock, None, tmp_path / "first", lambda _: None)
    cached = next((tmp_path / "home" / "rattler-cache").glob("libfoo-1.0-*")) / "lib" / "libfoo.txt"
    cached.write_text("tampered\n")  # in place: the first environment shares the inode and changes too
    second, _ = materialize(lock, None, tmp_path / "second", lambda _: None)
    assert (second / "lib" / "libfoo.txt").read_text() == "foo 1.0\n"
    assert check_lock(lock, Prefix(second)).clean
    report = check_lock(lock, Prefix(first)).report
    assert [p.modified for p in report.packages if p.key.startswith("libfoo")] == [("lib/libfoo.txt",)]
    with pytest.raises(Exception, match="changed since it was made"):
        materialize(lock, None, tmp_path / "first", lambda _: None)


def test_a_package_cache_file_changed_with_its_mtime_put_back_is_extracted_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Same size, same mtime, same inode: only the ctime tells (the cache's stamps keep it, recorded again
    after each install since the install's own links move it)."""
    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    lock = make_lock(tmp_path, "1.0")
    materialize(lock, None, tmp_path / "first", lambda _: None)
    materialize(lock, None, tmp_path / "second", lambda _: None)  # links again: stamps recorded after it
    cached = next((tmp_path / "home" / "rattler-cache").glob("libfoo-1.0-*")) / "lib" / "libfoo.txt"
    before = cached.stat()
    cached.write_text("FOO 1.0\n")
    os.utime(cached, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (cached.stat().st_size, cached.stat().st_mtime_ns, cached.stat().st_ino) == (
        before.st_size,
        before.st_mtime_ns,
        before.st_ino,
    )
    said: list[str] = []
    third, _ = materialize(lock, None, tmp_path / "third", said.append)
    assert (third / "lib" / "libfoo.txt").read_text() == "foo 1.0\n"
    assert any("held changed files of libfoo 1.0" in line for line in said)
    assert check_lock(lock, Prefix(third)).clean


def test_a_forged_image_is_refused_whatever_it_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The attack of the issue: a file replaced, and every digest and label recomputed to match (no key
    is needed for that); only the packages' own hashes tell."""
    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    lock = make_lock(tmp_path, "1.0")
    prefix, _ = materialize(lock, None, tmp_path / "env", lambda _: None)
    tree = tmp_path / "work" / "tree"
    shutil.copytree(prefix, tree, symlinks=True)
    (tree / "bin" / "foo").unlink()
    (tree / "bin" / "foo").write_text("#!/bin/sh\necho owned\n")
    manifest, _ = env_manifest.build(tree)
    env_manifest.write(
        tree,
        manifest,
        {},
        {
            "environment_digest": env_manifest.digest(manifest),
            "lock_sha256": file_digest(lock),
            "platform": "linux-64",
            "prefix": "/opt/env",
        },
    )
    _write_image(
        BuiltTree(load_lock(lock), "linux-64", file_digest(lock), env_manifest.digest(manifest), tree, "/opt/env"),
        tmp_path / "work",
        ExportRequest(lock, tmp_path / "forged"),
        lambda _: None,
    )
    labels_say = run_cli("check", "--image", str(tmp_path / "forged"))
    assert labels_say.returncode == 0  # the image agrees with itself: that proves nothing
    proven = run_cli(
        "check", "--lock", str(lock), "--image", str(tmp_path / "forged"), env={"LOCKGEN_HOME": str(tmp_path / "home")}
    )
    assert proven.returncode == 1 and "libfoo 1.0: modified bin/foo" in proven.stdout, proven.stdout + proven.stderr


def test_a_check_only_entry_is_refused_by_materialize(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    entry = LockedPackage(
        name="localbuild",
        version="1.0",
        manager="pip",
        platform="linux-64",
        url=lock_builder.unpublished_url("localbuild", "1.0"),
        hash=PackageHash(sha256="0" * 64),
    )
    lock = tmp_path / "locks" / "x.conda-lock.yml"
    lock.parent.mkdir()
    lock.write_text(
        dump_lock(
            lock_builder.pinned_lock("x", "inv.json", "0" * 64, "linux-64", "3.11", {}, ["localbuild 1.0"], [entry])
        )
    )
    with pytest.raises(UserError, match="check-only"):
        materialize(lock, None, tmp_path / "env", lambda _: None)


def test_a_package_link_pointing_elsewhere_is_modified(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A link is checked by its target, as the archive holds it: repointing lib/libfoo.so is drift."""
    from tests.channel_factory import Pkg, build_channel, cpu_lock

    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    channel = build_channel(
        tmp_path / "channel",
        [Pkg("libfoo", "1.0", files={"lib/libfoo.so.1": "elf\n"}, links={"lib/libfoo.so": "libfoo.so.1"})],
    )
    lock = cpu_lock(tmp_path, channel.as_uri(), ["libfoo"])
    prefix, _ = materialize(lock, None, tmp_path / "env", lambda _: None)
    assert os.readlink(prefix / "lib" / "libfoo.so") == "libfoo.so.1"
    assert check_lock(lock, Prefix(prefix)).clean
    (prefix / "lib" / "libfoo.so").unlink()
    (prefix / "lib" / "libfoo.so").symlink_to("/tmp/evil.so")
    assert "libfoo 1.0: modified lib/libfoo.so" in check_lock(lock, Prefix(prefix)).lines()


def test_a_repeated_check_proves_by_fingerprints_and_sees_an_edit_with_its_mtime_put_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`check --lock` of an environment checked before reads only files whose fingerprint moved; an edit that
    keeps size and mtime still moves ctime, so it is read and found; `full` reads everything."""
    from lockgen.adapters.proof import prefix_observer

    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    lock = make_lock(tmp_path, "1.0")
    prefix, _ = materialize(lock, None, tmp_path / "env", lambda _: None)
    time.sleep(prefix_observer.RACY_NS / 1e9)  # files changed within RACY_NS of a check are read again by the next
    read: list[str] = []
    real = prefix_observer.hash_files
    monkeypatch.setattr(
        prefix_observer,
        "hash_files",
        lambda files, progress=None: read.extend(p for p, _ in files) or real(files, progress),
    )
    assert check_lock(lock, Prefix(prefix)).clean and any(p.endswith("lib/libfoo.txt") for p in read)
    read.clear()
    assert check_lock(lock, Prefix(prefix)).clean and read == []  # every file proven by its fingerprint
    target = prefix / "lib" / "libfoo.txt"
    before = target.stat()
    target.write_text("FOO 1.0\n")
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    report = check_lock(lock, Prefix(prefix)).report
    assert read == [str(target)]
    assert [p.modified for p in report.packages if p.key.startswith("libfoo")] == [("lib/libfoo.txt",)]
    read.clear()
    assert not check_lock(lock, Prefix(prefix), full=True).clean and len(read) > 1
    other = make_lock(tmp_path / "other", "1.0")  # another lock (other bytes): nothing kept for it
    read.clear()
    check_lock(other, Prefix(prefix))
    assert len(read) > 1
