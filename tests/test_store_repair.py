"""Proofs kept, not redone, and a damaged store repaired (issue 43): removing an environment is no edit of the store
files it linked (their proofs stand: nothing is hashed again), an edit through an environment's hard link is found,
the damaged store folder moved into the quarantine, every environment linking it named with a command that makes it
again, and the next materialize fetches the wheel again; `lockgen store verify` reads every byte, which finds what a
stat cannot see, and `--repair` moves it out."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lockgen.adapters import parallel
from lockgen.adapters.conda import rattler_cache
from lockgen.api.check import check_lock
from lockgen.api.materialize import materialize
from lockgen.errors import LockFormatError
from lockgen.model.requests import Prefix
from tests.conftest import run_cli
from tests.test_export import make_lock
from tests.test_pypi_offline import index_url, served  # noqa: F401 (fixtures)
from tests.test_wheel_store import hashed, lock  # noqa: F401 (fixtures)

SITE = "lib/python3.11/site-packages"


def _site_hashed(seen: list[str]) -> list[str]:
    return [path for path in seen if "/site-packages/" in path]


@pytest.mark.slow
def test_removing_an_environment_keeps_the_wheels_proofs(
    lock: Path,  # noqa: F811
    tmp_path: Path,
    hashed: list[str],  # noqa: F811
) -> None:
    """Fails before: removing `one` moved the ctime of every store inode it linked, which was part of the proof."""
    one, _ = materialize(lock, None, tmp_path / "one", lambda _: None)
    assert _site_hashed(hashed)
    shutil.rmtree(one)
    hashed.clear()
    said: list[str] = []
    two, _ = materialize(lock, None, tmp_path / "two", said.append)
    assert _site_hashed(hashed) == []
    assert any("0 hashed" in line for line in said)
    shutil.rmtree(two)
    hashed.clear()
    materialize(lock, None, tmp_path / "three", lambda _: None)  # and again: the proofs were kept, not thrown away
    assert _site_hashed(hashed) == []


@pytest.mark.slow
def test_removing_an_environment_keeps_the_package_cache_stamps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fails before: the conda packages' extracted folders were hashed again after an environment was removed."""
    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    conda_lock = make_lock(tmp_path, "1.0")
    first, _ = materialize(conda_lock, None, tmp_path / "first", lambda _: None)
    cached = next((tmp_path / "home" / "rattler-cache").glob("libfoo-1.0-*")) / "lib" / "libfoo.txt"
    assert not cached.stat().st_mode & 0o222  # read-only once stamped, in the environment too (one inode)
    assert (first / "lib" / "libfoo.txt").stat().st_ino == cached.stat().st_ino
    shutil.rmtree(first)
    read: list[Path] = []
    real = rattler_cache._sha256
    monkeypatch.setattr(rattler_cache, "_sha256", lambda path: (read.append(path), real(path))[1])
    second, _ = materialize(conda_lock, None, tmp_path / "second", lambda _: None)
    assert read == []
    assert check_lock(conda_lock, Prefix(second)).clean


@pytest.mark.slow
def test_an_edit_through_an_environment_is_repaired_by_the_command_named(
    lock: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The issue's trial: `echo … >> ENV/…/alpha/__init__.py` in one environment changes the store file it links.
    The next materialize refuses it, moves the store's folder out and names `one` with a command; that command makes
    `one` again and the materialize after succeeds (before: refused again and again, `uv cache clean` or not)."""
    one, _ = materialize(lock, None, tmp_path / "one", lambda _: None)
    edited = one / SITE / "alpha" / "__init__.py"
    data = edited.read_bytes()
    with open(edited, "a") as appended:  # root writes through the missing write bit, as a careless tool would
        appended.write("x = 1\n")
    said: list[str] = []
    with pytest.raises(LockFormatError) as refused:
        materialize(lock, None, tmp_path / "two", said.append)
    assert "moved out to" in refused.value.message and refused.value.hint.startswith("materialize (or unpack) again")
    assert list((tmp_path / "home" / "quarantine").glob("*-wheel-*"))
    named = [line for line in said if line.startswith(f"{one} shares the damaged files; make it again: ")]
    assert len(named) == 1
    command = named[0].split("make it again: ", 1)[1]
    assert shlex.split(command)[:4] == ["rm", "-rf", "--", str(one)]
    runnable = command.replace("&& lockgen ", f"&& {shlex.quote(sys.executable)} -m lockgen ")
    done = subprocess.run(
        ["bash", "-c", runnable],
        capture_output=True,
        text=True,
        env={**os.environ, "LOCKGEN_HOME": str(tmp_path / "home")},
    )
    assert done.returncode == 0, done.stderr
    assert edited.read_bytes() == data and check_lock(lock, Prefix(one)).clean
    two, _ = materialize(lock, None, tmp_path / "two", lambda _: None)
    assert (two / SITE / "alpha" / "__init__.py").read_bytes() == data


@pytest.mark.slow
def test_store_verify_reads_what_a_stat_cannot_see_and_repairs_it(
    lock: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """An edit that puts size and mtime back while an environment is removed (the link count moved too) passes the
    stat check by design; `lockgen store verify` reads every byte and finds it (exit 1), names the environment that
    links it, and `--repair` moves it out so that the next materialize is whole; `materialize --verify` refuses it
    too."""
    home = {"LOCKGEN_HOME": str(tmp_path / "home")}
    one, _ = materialize(lock, None, tmp_path / "one", lambda _: None)
    two, _ = materialize(lock, None, tmp_path / "two", lambda _: None)
    stored = next((tmp_path / "home" / "uv-cache" / "archive-v0").glob("*/alpha/__init__.py"))
    before, data = stored.stat(), stored.read_bytes()
    shutil.rmtree(one)
    stored.write_bytes(data[:-1] + (b"#" if data[-1:] != b"#" else b"!"))
    os.utime(stored, ns=(before.st_atime_ns, before.st_mtime_ns))
    clean = run_cli("store", "verify", env=home)
    assert clean.returncode == 1, clean.stderr
    assert f"damaged wheel folder {stored.parent.parent}" in clean.stdout and "left in place" in clean.stdout
    assert (
        f"{two} links the damaged files; make it again: rm -rf -- {two} && lockgen materialize {lock} --prefix {two}"
        in clean.stdout
    )
    assert "hint: lockgen store verify --repair" in clean.stderr
    repaired = run_cli("store", "verify", "--repair", "--json", env=home)
    assert repaired.returncode == 0, repaired.stderr
    report = json.loads(repaired.stdout)
    [found] = report["damaged"]
    assert found["store"] == "wheel" and found["files"] == ["alpha/__init__.py"] and Path(found["quarantined"]).is_dir()
    assert not stored.parent.parent.exists()
    three, _ = materialize(lock, None, tmp_path / "three", lambda _: None)
    assert (three / SITE / "alpha" / "__init__.py").read_bytes() == data
    again = run_cli("store", "verify", env=home)
    assert again.returncode == 0 and "0 folders damaged" in again.stderr
    stored = next((tmp_path / "home" / "uv-cache" / "archive-v0").glob("*/alpha/__init__.py"))
    before = stored.stat()
    shutil.rmtree(three)
    stored.write_bytes(data[:-1] + (b"#" if data[-1:] != b"#" else b"!"))
    os.utime(stored, ns=(before.st_atime_ns, before.st_mtime_ns))
    with pytest.raises(LockFormatError):  # --verify trusts no fingerprint
        materialize(lock, None, tmp_path / "four", lambda _: None, verify=True)


@pytest.mark.slow
def test_store_verify_repairs_a_package_cache_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    conda_lock = make_lock(tmp_path, "1.0")
    first, _ = materialize(conda_lock, None, tmp_path / "first", lambda _: None)
    cached = next((tmp_path / "home" / "rattler-cache").glob("libfoo-1.0-*")) / "lib" / "libfoo.txt"
    before = cached.stat()
    shutil.rmtree(first)
    cached.write_text("FOO 1.0\n")  # the same size
    os.utime(cached, ns=(before.st_atime_ns, before.st_mtime_ns))
    found = run_cli("store", "verify", "--repair", env={"LOCKGEN_HOME": str(tmp_path / "home")})
    assert found.returncode == 0, found.stderr
    assert (
        f"damaged conda folder {cached.parent.parent}: 1 files differ (first lib/libfoo.txt); moved to " in found.stdout
    )
    assert not cached.parent.parent.exists()
    second, _ = materialize(
        conda_lock, None, tmp_path / "second", lambda _: None
    )  # extracted again from the verified archive
    assert (second / "lib" / "libfoo.txt").read_text() == "foo 1.0\n"
    assert check_lock(conda_lock, Prefix(second)).clean


def test_store_verify_of_an_empty_store_reads_nothing(tmp_path: Path) -> None:
    done = run_cli("store", "verify", env={"LOCKGEN_HOME": str(tmp_path / "home")})
    assert done.returncode == 0 and "read 0 store files again: 0 folders damaged" in done.stderr
    assert parallel.cores() >= 1


def test_the_notes_of_environments_made_are_kept_short(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The notes grow a line per build; past their bound they are written again with the environments still there."""
    from lockgen.adapters.proof import store_scrub

    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(store_scrub, "MOST_NOTES_BYTES", 600)
    kept = tmp_path / "kept"
    kept.mkdir()
    for n in range(8):
        store_scrub.remember(tmp_path / f"gone-{n}", tmp_path / "a.conda-lock.yml", "linux-64")
    store_scrub.remember(kept, tmp_path / "a.conda-lock.yml", "linux-64")
    notes = (tmp_path / "home" / "proven" / "prefixes.jsonl").read_text().splitlines()
    assert len(notes) <= 4 and json.loads(notes[-1])["prefix"] == str(kept)
    assert [
        environment.prefix
        for environment in store_scrub.sharing("conda", [(kept.stat().st_dev, kept.stat().st_ino)], ["."])
    ] == [kept]


@pytest.mark.slow
def test_the_store_environment_is_not_stuck_after_the_cache_is_cleaned(
    lock: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The issue's second trial: the store's own environment (no --prefix) shares the damaged file; after the cache is
    cleaned (`uv cache clean`) it was still refused for good. It is named with a command that makes it again."""
    from lockgen.adapters.pypi import wheel_store

    store_env, _ = materialize(lock, None, None, lambda _: None)
    with open(store_env / SITE / "alpha" / "__init__.py", "a") as appended:
        appended.write("x = 1\n")
    said: list[str] = []
    with pytest.raises(LockFormatError):
        materialize(lock, None, tmp_path / "two", said.append)
    [named] = [
        line.split("make it again: ", 1)[1] for line in said if line.startswith(f"{store_env} shares the damaged files")
    ]
    shutil.rmtree(wheel_store.cache_dir())  # uv cache clean
    runnable = named.replace("&& lockgen ", f"&& {shlex.quote(sys.executable)} -m lockgen ")
    done = subprocess.run(
        ["bash", "-c", runnable],
        capture_output=True,
        text=True,
        env={**os.environ, "LOCKGEN_HOME": str(tmp_path / "home")},
    )
    assert done.returncode == 0, done.stderr
    said.clear()
    assert materialize(lock, None, None, said.append)[0] == store_env
    assert any("already materialized" in line for line in said) and check_lock(lock, Prefix(store_env)).clean


@pytest.mark.slow
def test_a_package_cache_folder_changed_through_an_environment_is_moved_out_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: the changed folder was deleted unseen, and the environment sharing the change was not named."""
    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    conda_lock = make_lock(tmp_path, "1.0")
    first, _ = materialize(conda_lock, None, tmp_path / "first", lambda _: None)
    with open(first / "lib" / "libfoo.txt", "a") as appended:
        appended.write("tampered\n")
    said: list[str] = []
    second, _ = materialize(conda_lock, None, tmp_path / "second", said.append)
    assert (second / "lib" / "libfoo.txt").read_text() == "foo 1.0\n"
    [moved] = list((tmp_path / "home" / "quarantine").glob("*-conda-libfoo-1.0-*"))
    assert (moved / "lib" / "libfoo.txt").read_text().endswith("tampered\n")
    assert any(f"moved to {moved}" in line for line in said), said
    assert any(
        line.startswith(
            f"{first} shares the changed files; make it again: rm -rf -- {first} && lockgen materialize "
            f"{conda_lock} --prefix {first}"
        )
        for line in said
    ), said


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    raw=st.binary(max_size=300),
    lines=st.lists(
        st.dictionaries(
            st.sampled_from(["prefix", "lock", "platform"]), st.one_of(st.text(max_size=20), st.integers(), st.none())
        ),
        max_size=4,
    ),
)
def test_notes_of_any_shape_name_only_what_they_can(
    raw: bytes, lines: list[dict], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The notes are lockgen's own file, but anything may be in it (a line cut short, an edit): no shape breaks a
    repair, and only a note with a prefix, lock and platform, all text, names an environment."""
    from lockgen.adapters.proof import store_scrub

    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    notes = tmp_path / "home" / "proven" / "prefixes.jsonl"
    notes.parent.mkdir(parents=True, exist_ok=True)
    notes.write_bytes(raw + b"\n" + "\n".join(json.dumps(line) for line in lines).encode())
    for prefix, note in store_scrub._noted().items():
        assert note["prefix"] == prefix and all(isinstance(note[key], str) for key in ("lock", "platform"))
    assert store_scrub.sharing("wheel", [(0, 0)], ["x.py"]) == []


@pytest.mark.parametrize(
    "folder, path",
    [
        ("archive-v0/../../etc", "passwd"),
        ("archive-v0/\x00x", "a.py"),
        ("elsewhere/x", "a.py"),
        ("archive-v0/x", "../../../etc/passwd"),
    ],
)
def test_a_proof_naming_a_path_outside_the_store_proves_nothing(tmp_path: Path, folder: str, path: str) -> None:
    """A proof record is lockgen's, but anyone who can write the store can change it: one naming a folder or file
    outside the store is left out of the scrub (nothing outside is read, moved or named), not an error."""
    from lockgen.adapters.proof import fingerprint_records
    from lockgen.adapters.pypi import wheel_store

    proofs = tmp_path / "home" / "proven" / "wheels"
    proofs.mkdir(parents=True)
    (tmp_path / "home" / "uv-cache" / "archive-v0" / "x").mkdir(parents=True)
    fields = {"layout": wheel_store.PROOF_LAYOUT, "wheel": "a" * 64, "folder": folder}
    record = fingerprint_records.encode(fields, [path], [0] * wheel_store.WIDTH, "0" * 64)
    (proofs / f"{'a' * 64}.json").write_bytes(record)
    done = run_cli("store", "verify", "--repair", env={"LOCKGEN_HOME": str(tmp_path / "home")})
    assert done.returncode == 0 and "read 0 store files again: 0 folders damaged" in done.stderr, done.stderr
    assert not (tmp_path / "home" / "quarantine").exists()
