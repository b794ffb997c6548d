"""Hash once, then trust fingerprints, for wheels: a second materialize of the same wheels reads none of the
files uv links from lockgen's store (each proven against its RECORD the first time, its fingerprint
unchanged), `--verify` reads them all, and a store file changed in place, even with its size and mtime put
back (its ctime moves while its link count stays), is hashed again, refused and moved out of the store."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lockgen.adapters import parallel
from lockgen.api import resolve as api
from lockgen.api.materialize import materialize
from lockgen.errors import LockFormatError
from tests.test_pypi_offline import index_url, served, stack  # noqa: F401 (fixtures)


@pytest.fixture
def lock(tmp_path: Path, index_url: str, monkeypatch: pytest.MonkeyPatch) -> Path:  # noqa: F811
    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    path = stack(tmp_path, index_url, 'gamma = "*"')
    path.write_text(path.read_text().replace('platforms = ["linux-64", "linux-aarch64"]', 'platforms = ["linux-64"]'))
    api.resolve(path)
    return tmp_path / "locks" / "cpu.conda-lock.yml"


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths materialize reads to hash (every call of the parallel hasher)."""
    seen: list[str] = []
    real = parallel.hash_files

    def spy(files, progress=None):
        seen.extend(path for path, _ in files)
        return real(files, progress)

    monkeypatch.setattr(parallel, "hash_files", spy)
    return seen


def test_a_second_materialize_reads_no_proven_file(lock: Path, tmp_path: Path, hashed: list[str]) -> None:
    first, digest = materialize(lock, None, tmp_path / "one", lambda _: None)
    wheel_files = [p for p in hashed if "/site-packages/" in p]
    assert any(p.endswith("alpha/__init__.py") for p in wheel_files)
    hashed.clear()
    second, again = materialize(lock, None, tmp_path / "two", lambda _: None)
    assert again == digest
    assert [p for p in hashed if "/site-packages/" in p] == []  # proven links: stat only
    assert (second / "lib/python3.11/site-packages/alpha/__init__.py").stat().st_ino == (
        first / "lib/python3.11/site-packages/alpha/__init__.py"
    ).stat().st_ino
    materialize(lock, None, tmp_path / "three", lambda _: None, verify=True)
    assert len([p for p in hashed if "/site-packages/" in p]) == len(wheel_files)  # --verify trusts nothing


def test_a_build_from_the_store_loads_no_http_client_and_no_conda_module(lock: Path, tmp_path: Path) -> None:
    """A pure-PyPI lock whose wheels are proven is built from the store with uv --offline: the wheel reader with its
    HTTP client and the conda side's modules are imported where they are used, not by this build (11 ms of
    urllib.request, http.client and netrc in the loop of issue 43), nor the results' dataclasses, which only a drift
    check or a damaged store's report makes (about 12 ms)."""
    from tests.test_cli_startup import _loaded

    materialize(lock, None, tmp_path / "one", lambda _: None)  # fetched, proven, its manifests kept
    watched = (
        "urllib.request",
        "http.client",
        "lockgen.adapters.store.package_store",
        "lockgen.adapters.conda.rattler_cache",
        "lockgen.adapters.pypi.wheel_record",
        "lockgen.model.results",
    )
    code, loaded = _loaded(watched, "materialize", str(lock), "--prefix", str(tmp_path / "two"))
    assert (code, loaded) == (0, "loaded: []")
    assert (tmp_path / "two" / "lib/python3.11/site-packages/alpha/__init__.py").is_file()


def test_a_store_file_changed_in_place_is_hashed_refused_and_moved_out(
    lock: Path, tmp_path: Path, hashed: list[str]
) -> None:
    materialize(lock, None, tmp_path / "one", lambda _: None)
    stored = next((tmp_path / "home" / "uv-cache" / "archive-v0").glob("*/alpha/__init__.py"))
    before = stored.stat()
    assert not before.st_mode & 0o222  # the store's files are read-only once proven
    data = stored.read_bytes()
    stored.write_bytes(data.replace(b"1.0", b"6.6") if b"1.0" in data else data[:-1] + b"#")
    os.utime(stored, ns=(before.st_atime_ns, before.st_mtime_ns))  # size and mtime as they were: only ctime moved
    assert (stored.stat().st_size, stored.stat().st_mtime_ns, stored.stat().st_nlink) == (
        before.st_size,
        before.st_mtime_ns,
        before.st_nlink,
    )
    hashed.clear()
    said: list[str] = []
    with pytest.raises(LockFormatError) as refused:
        materialize(lock, None, tmp_path / "two", said.append)
    assert "differ from their wheel's RECORD" in refused.value.message and "alpha/__init__.py" in refused.value.message
    assert any(p.endswith("alpha/__init__.py") for p in hashed)
    assert not (tmp_path / "two").exists()
    quarantined = next((tmp_path / "home" / "quarantine").glob("*-wheel-*"))  # moved out, not deleted, and named
    assert str(quarantined) in refused.value.message and (quarantined / "alpha" / "__init__.py").read_bytes() != data
    assert any(
        line.startswith(f"{tmp_path / 'one'} shares the damaged files") for line in said
    )  # the environment linking it
    second, _ = materialize(lock, None, tmp_path / "two", lambda _: None)  # fetched again against its locked hash
    assert (second / "lib/python3.11/site-packages/alpha/__init__.py").read_bytes() == data


def test_a_damaged_or_older_proof_record_proves_nothing(lock: Path, tmp_path: Path, hashed: list[str]) -> None:
    import json

    from lockgen.adapters.proof import fingerprint_records
    from lockgen.adapters.pypi import wheel_store

    materialize(lock, None, tmp_path / "one", lambda _: None)
    records = sorted((tmp_path / "home" / "proven" / "wheels").glob("*.json"))
    assert records

    def read(path: Path) -> dict:  # through the one reader of the records, as materialize reads them
        record = fingerprint_records.decode(path.read_bytes(), wheel_store.PROOF_LAYOUT, wheel_store.WIDTH, True)
        assert record is not None, path
        return record

    kept = {path: read(path) for path in records}
    damages = [
        lambda r: {
            "files": {
                p: [*r["fingerprints"][7 * i : 7 * i + 7], r["sha256"][64 * i : 64 * i + 64]]
                for i, p in enumerate(r["paths"])
            }
        },  # the form of the first layout
        lambda r: {**r, "fingerprints": r["fingerprints"][:-1]},
        lambda r: {**r, "sha256": r["sha256"][:-1]},
        lambda r: {**r, "sha256": [r["sha256"]]},
        lambda r: {**r, "paths": None},
        lambda r: {**r, "fingerprints": [True, *r["fingerprints"][1:]]},  # a bool is no device number
        lambda r: {**r, "paths": [None, *r["paths"][1:]]},
        lambda r: {**r, "layout": wheel_store.PROOF_LAYOUT - 1},
    ]
    for n, damage in enumerate(damages):
        for path, record in kept.items():
            path.write_text(json.dumps(damage(record)))
        hashed.clear()
        materialize(lock, None, tmp_path / f"env-{n}", lambda _: None)  # proven again from the files themselves
        assert any(p.endswith("alpha/__init__.py") for p in hashed), n
        kept = {path: read(path) for path in records}  # the records the install wrote again
    hashed.clear()
    materialize(lock, None, tmp_path / "after", lambda _: None)
    assert [p for p in hashed if "/site-packages/" in p] == []  # and trusted again from them


def test_the_collector_is_paused_for_a_build_and_on_again_after_it(
    lock: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gc

    from lockgen.adapters.store import installers

    seen: list[bool] = []
    real = installers.install_pip
    monkeypatch.setattr(installers, "install_pip", lambda *a, **k: (seen.append(gc.isenabled()), real(*a, **k))[1])
    materialize(lock, None, tmp_path / "one", lambda _: None)
    assert seen == [False] and gc.isenabled()

    def failing(*args: object, **kwargs: object) -> None:
        raise LockFormatError("uv failed", "")

    monkeypatch.setattr(installers, "install_pip", failing)
    monkeypatch.setenv("LOCKGEN_INSTALLER", "uv")  # uv's install, not lockgen's placing of what uv placed before
    with pytest.raises(LockFormatError):
        materialize(lock, None, tmp_path / "two", lambda _: None)
    assert gc.isenabled() and not (tmp_path / "two").exists()


@pytest.mark.slow
def test_wheels_in_the_store_install_after_their_index_is_gone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An index whose answers must be revalidated (`Cache-Control: no-cache` here; Python's own file server,
    which sends no cache headers, was seen to need it after half an hour) makes uv ask it again for each cached
    wheel before linking it: once that index is down, a materialize of a lock whose every wheel is in lockgen's
    store failed with uv's `Connection refused` (fails before). The store installs without a request; a wheel
    missing from it after all (the cache cleaned) is fetched again, and fails plainly when the index is gone."""
    import functools
    import http.server
    import shutil
    import threading

    from lockgen.adapters.pypi import wheel_store
    from lockgen.errors import ToolFailedError
    from tests.conftest import _QuietHandler
    from tests.wheel_index import Wheel, build_index

    class Revalidated(_QuietHandler):
        def end_headers(self) -> None:
            self.send_header("Cache-Control", "no-cache")
            super().end_headers()

    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    root = build_index(tmp_path / "index", [Wheel("alpha", "1.0"), Wheel("gamma", "1.0", requires=("alpha",))])
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Revalidated, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        path = stack(tmp_path, f"http://127.0.0.1:{server.server_address[1]}/simple", 'gamma = "*"')
        path.write_text(
            path.read_text().replace('platforms = ["linux-64", "linux-aarch64"]', 'platforms = ["linux-64"]')
        )
        api.resolve(path)
        lock = tmp_path / "locks" / "cpu.conda-lock.yml"
        _, digest = materialize(lock, None, tmp_path / "one", lambda _: None)
    finally:
        server.shutdown()
        server.server_close()
    said: list[str] = []
    assert materialize(lock, None, tmp_path / "two", said.append)[1] == digest
    assert not any("no longer in lockgen's store" in line for line in said)
    shutil.rmtree(wheel_store.cache_dir())  # the store cleaned behind lockgen's back, the index still gone
    said.clear()
    with pytest.raises(ToolFailedError):
        materialize(lock, None, tmp_path / "three", said.append)
    assert any("no longer in lockgen's store" in line for line in said) and not (tmp_path / "three").exists()


def test_removing_an_environment_that_shares_the_wheels_is_no_edit_of_the_others(
    lock: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Environments A and B link the same store files; removing B moves the ctime and link count of A's files. A's
    `check --lock`, `check --prefix` and a repeated materialize stand on their kept verdicts, reading no file and
    saying so; an edit of A's file through its content, its size and mtime put back (its ctime moves, its link
    count does not), is still found by each. Before, every file B shared was read again by each of them."""
    import shutil
    import time

    from lockgen.adapters.proof import prefix_observer, stat_walk
    from lockgen.api.check import check_lock, check_prefix
    from lockgen.model.requests import Prefix
    from tests.conftest import run_cli

    a, _ = materialize(lock, None, tmp_path / "a", lambda _: None)
    b, _ = materialize(lock, None, tmp_path / "b", lambda _: None)
    target = a / "lib/python3.11/site-packages/alpha/__init__.py"
    assert target.stat().st_ino == (b / "lib/python3.11/site-packages/alpha/__init__.py").stat().st_ino
    settle = stat_walk.RACY_NS / 1e9 + 0.05
    time.sleep(settle)
    assert check_prefix(a, full=False).clean  # its record's fingerprints kept anew (B's links moved their ctime)
    time.sleep(settle)
    assert (
        check_lock(lock, Prefix(a)).clean and check_prefix(a, full=False).clean
    )  # every byte read once; verdicts kept
    links = target.stat().st_nlink
    shutil.rmtree(b)
    assert target.stat().st_nlink == links - 1
    read: list[str] = []
    real_hash, real_ahead = prefix_observer.hash_files, prefix_observer.hash_ahead
    monkeypatch.setattr(
        prefix_observer,
        "hash_files",
        lambda files, progress=None: read.extend(p for p, _ in files) or real_hash(files, progress),
    )
    monkeypatch.setattr(
        prefix_observer, "hash_ahead", lambda files: read.extend(p for p, _ in files) or real_ahead(files)
    )
    monkeypatch.setattr(
        parallel,
        "hash_files",
        lambda files, progress=None: read.extend(p for p, _ in files) or real_hash(files, progress),
    )
    said: list[str] = []
    assert check_lock(lock, Prefix(a), progress=said.append).clean and read == []  # at once: the tree not settled yet
    assert any(
        "another environment sharing them was made or removed: no edit, 0 files read" in line for line in said
    ), said
    assert check_prefix(a, full=False).clean and read == []
    time.sleep(settle)
    done = run_cli("check", "--prefix", str(a), "--lock", str(lock), env={"LOCKGEN_HOME": str(tmp_path / "home")})
    assert done.returncode == 0 and "0 files read" in done.stderr, done.stderr  # settled: the link counts of now kept
    assert check_prefix(a, full=False).clean and read == []  # the record's fingerprints kept anew, unread
    assert materialize(lock, None, a, lambda _: None)[0] == a and read == []
    data, before = target.read_bytes(), target.stat()
    target.chmod(0o644)
    target.write_bytes(data[:-1] + (b"#" if data[-1:] != b"#" else b"!"))  # same size
    target.chmod(stat_mode := before.st_mode & 0o7777)
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))  # size, mtime, mode as they were; ctime moved
    assert (
        target.stat().st_size,
        target.stat().st_mtime_ns,
        target.stat().st_mode & 0o7777,
        target.stat().st_nlink,
    ) == (before.st_size, before.st_mtime_ns, stat_mode, before.st_nlink)
    result = check_lock(lock, Prefix(a))
    assert not result.clean and str(target) in read
    assert check_prefix(a, full=False).modified == ["lib/python3.11/site-packages/alpha/__init__.py"]
    with pytest.raises(Exception, match="changed since it was made"):
        materialize(lock, None, a, lambda _: None)


def test_a_hard_link_made_after_an_edit_hides_nothing_in_a_file_of_the_environment_alone(
    lock: Path, tmp_path: Path
) -> None:
    """A file no other environment or the store links (a launcher, `pyvenv.cfg`: a link count of 1), edited with
    its size and mtime put back and then hard-linked elsewhere, moves its ctime and its link count together: the
    rule that lets a sibling environment's removal be no edit must not let this one pass (found by a review:
    `check --prefix` and a repeated materialize passed it)."""
    import time

    from lockgen.adapters.proof import stat_walk
    from lockgen.api.check import check_lock, check_prefix
    from lockgen.model.requests import Prefix

    a, _ = materialize(lock, None, tmp_path / "a", lambda _: None)
    time.sleep(stat_walk.RACY_NS / 1e9 + 0.05)
    assert check_lock(lock, Prefix(a)).clean and check_prefix(a, full=False).clean  # verdicts kept, tree settled
    target = a / "pyvenv.cfg"
    before = target.stat()
    assert before.st_nlink == 1
    data = target.read_bytes()
    target.write_bytes(data[:-1] + (b"#" if data[-1:] != b"#" else b"!"))  # same size
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.link(target, tmp_path / "elsewhere")  # its link count moves with its ctime
    assert check_prefix(a, full=False).modified == ["pyvenv.cfg"]  # (`check --lock` proves the files packages state)
    with pytest.raises(Exception, match="changed since it was made"):
        materialize(lock, None, a, lambda _: None)


def _cli(lock: Path, prefix: Path, *, reparse: bool = False) -> tuple[int, str, str, str]:
    """`lockgen materialize LOCK --prefix PREFIX` in a process of its own, on the lock fixture's home: the exit code,
    stdout, stderr and the modules it imported (`reparse`: the typer app's answer, every byte parsed)."""
    from tests.test_fast_path import _lockgen

    home = lock.parent.parent / "home"
    return _lockgen("materialize", str(lock), "--prefix", str(prefix), home=home, reparse=reparse, importtime=True)


def test_a_build_of_a_kept_lock_on_the_fast_path_makes_what_the_typer_app_makes(lock: Path, tmp_path: Path) -> None:
    """A materialize into a new prefix of a lock whose checked value is kept is built without typer, the YAML or
    pydantic (issue 43: the fast path takes the kept value, as plain records), and makes the environment the typer
    app makes from the parsed YAML: at the same prefix, the same digest, stdout and manifest bytes (stats.json
    holds inodes and times)."""
    import shutil

    from lockgen.adapters.store.env_manifest import MANIFEST

    materialize(lock, None, tmp_path / "one", lambda _: None)  # fetched, proven, the lock's value kept
    prefix = tmp_path / "two"
    typer_app = _cli(lock, prefix, reparse=True)
    assert typer_app[0] == 0 and "typer" in typer_app[3].split() and "yaml" in typer_app[3].split()
    manifest = (prefix / MANIFEST).read_bytes()
    shutil.rmtree(prefix)
    fast = _cli(lock, prefix)
    assert fast[:2] == typer_app[:2], fast
    digest = [line for line in typer_app[2].splitlines() if line.startswith("environment digest sha256:")]
    assert len(digest) == 1 and digest[0] in fast[2].splitlines()
    for module in (
        "typer",
        "yaml",
        "pydantic",
        "lockgen.cli.app",
        "lockgen.adapters.lock.lockfile_yaml",
        "lockgen.model.spec",
    ):
        assert module not in fast[3].split(), module
    assert (prefix / MANIFEST).read_bytes() == manifest


def test_a_store_file_changed_in_place_is_refused_on_the_fast_path_too(lock: Path, tmp_path: Path) -> None:
    """The build of a kept lock on the fast path keeps every proof: a store file edited in place (size and mtime put
    back) is hashed, refused, moved out, and nothing is left at the prefix; the refusal is worded as the typer app
    words it, after the build said what it began."""
    materialize(lock, None, tmp_path / "one", lambda _: None)
    stored = next((tmp_path / "home" / "uv-cache" / "archive-v0").glob("*/alpha/__init__.py"))
    before, data = stored.stat(), stored.read_bytes()
    stored.write_bytes(data.replace(b"1.0", b"6.6") if b"1.0" in data else data[:-1] + b"#")
    os.utime(stored, ns=(before.st_atime_ns, before.st_mtime_ns))
    code, out, said, imported = _cli(lock, tmp_path / "two")
    assert code == 1 and out == "" and "typer" not in imported.split(), said
    assert "error: 1 installed files differ from their wheel's RECORD" in said and "alpha/__init__.py" in said
    assert "moved out to" in said and "hint: materialize (or unpack) again" in said
    assert not (tmp_path / "two").exists() and next((tmp_path / "home" / "quarantine").glob("*-wheel-*"))


WRITERS = """
import os, sys
from pathlib import Path
from lockgen.adapters.store import env_manifest
from lockgen.api.materialize import materialize

real = env_manifest.write
def noted(prefix, *args, **kwargs):  # the process that writes the record, noted where the test reads it
    with open(sys.argv[3], "a") as notes:
        notes.write(f"{os.getpid()} {os.getppid()}\\n")
    return real(prefix, *args, **kwargs)
env_manifest.write = noted
if sys.argv[4] == "no fork":
    def no_fork():
        raise OSError("no process to be had")
    os.fork = no_fork
print(os.getpid(), materialize(Path(sys.argv[1]), None, Path(sys.argv[2]), lambda _: None)[1])
"""


def test_the_record_is_written_by_a_child_meanwhile_and_is_what_the_build_writes_alone(
    lock: Path, tmp_path: Path
) -> None:
    """Once the wheels' files are proven, the environment's record (manifest and stats) is written by a forked child
    while the build records the proofs and checks for unstated files (issue 43's loop: the two cores share what uv
    left to do); where no child can be forked, the build writes it itself: the same manifest bytes and digest. In
    processes of their own (a pytest worker runs threads: no fork is made beside them)."""
    import subprocess
    import sys

    from lockgen.adapters.store.env_manifest import MANIFEST

    materialize(lock, None, tmp_path / "one", lambda _: None)  # fetched and proven: the next builds are from the store
    env = {**os.environ, "LOCKGEN_HOME": str(tmp_path / "home")}
    answers = []
    for name, how in (("two", "fork"), ("three", "no fork")):
        notes = tmp_path / f"writers-{name}"
        said = subprocess.run(
            [sys.executable, "-c", WRITERS, str(lock), str(tmp_path / name), str(notes), how],
            env=env,
            capture_output=True,
            text=True,
        )
        assert said.returncode == 0, said.stderr
        builder, digest = said.stdout.split()
        writers = [line.split() for line in notes.read_text().splitlines()]
        answers.append((builder, digest, writers))
    (builder, digest, writers), (alone, again, its_own) = answers
    assert writers == [[writers[0][0], builder]] and writers[0][0] != builder  # one record, by the build's child
    assert its_own == [[alone, its_own[0][1]]]  # no child: the build wrote it
    assert again == digest
    assert (tmp_path / "three" / MANIFEST).read_bytes().replace(b"three", b"two") == (
        tmp_path / "two" / MANIFEST
    ).read_bytes()


REFUSED_MEANWHILE = """
import os, sys
from pathlib import Path
from lockgen.api.steps import shared_steps
from lockgen.errors import LockFormatError
from lockgen.api.materialize import materialize

def refuse(*args):  # the check of unstated files refuses while the child writes the record
    raise LockFormatError("planted refusal", "none")
shared_steps._nothing_unstated = refuse
prefix = Path(sys.argv[2])
try:
    materialize(Path(sys.argv[1]), None, prefix, lambda _: None)
except LockFormatError as refused:
    print(refused.message)
try:
    print("a child left:", os.waitpid(-1, os.WNOHANG))
except ChildProcessError:
    print("no child left")
print(sorted(path.name for path in prefix.parent.iterdir() if prefix.name in path.name))
"""


def test_a_refusal_while_the_child_writes_the_record_leaves_no_child_and_nothing_at_the_prefix(
    lock: Path, tmp_path: Path
) -> None:
    """A build refused after the child that writes the record was forked (a file no package states) ends and waits
    for that child before its temporary folder is removed: nothing is left at the prefix or beside it, and no child
    outlives the build (in a process of its own: a pytest worker runs threads, and no fork is made beside them)."""
    import subprocess
    import sys

    materialize(lock, None, tmp_path / "one", lambda _: None)  # fetched and proven: the next build is from the store
    said = subprocess.run(
        [sys.executable, "-c", REFUSED_MEANWHILE, str(lock), str(tmp_path / "two")],
        env={**os.environ, "LOCKGEN_HOME": str(tmp_path / "home")},
        capture_output=True,
        text=True,
    )
    assert said.returncode == 0, said.stderr
    assert said.stdout.splitlines() == ["planted refusal", "no child left", "[]"]


_PARTS = st.sampled_from(["", ".", "..", "...", "a", ".a", "a.", "..a", "\n", "\0", "é"])


@settings(max_examples=400, deadline=None)
@given(st.lists(st.lists(_PARTS, max_size=4).map("/".join).map(lambda path: path.replace("//", "/")), max_size=4))
def test_climbing_finds_every_empty_dot_or_dot_dot_part(paths: list[str]) -> None:
    """`climbing`'s substring searches judge as a split of every path into parts does (a newline inside a path ends
    a part too; a NUL anywhere is no plain path)."""
    from lockgen.adapters.pypi.wheel_store import climbing

    joined = "\n".join(paths)
    parts = [part for line in joined.split("\n") for part in line.split("/")]
    assert climbing(paths) == ("\0" in joined or any(part in ("", ".", "..") for part in parts))
