"""Work done in forked children while the caller goes on (`parallel.Forked`): small files hashed ahead
(`parallel.hash_ahead`, `prefix_observer.likely_wanted`), the expected environment's digest and the kept
fingerprints (`conformance_store.saving`). The digests are the files' own, a file a child cannot read is left
to the caller (who meets the error), a failed child is work the caller does itself, an abandoned one ends,
no child is forked beside another thread, and a check whose work the children did gives the same report and
the same kept record as one that did it all itself, tampering included."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lockgen.adapters import parallel
from lockgen.adapters.proof import conformance_store, prefix_observer
from lockgen.api.check import check_lock
from lockgen.api.materialize import materialize
from lockgen.model.requests import Prefix
from tests.test_export import make_lock


class _Inline:
    """Stands for `parallel.Forked` where no child can be forked: the caller does the work."""

    def __init__(self, work: object) -> None:
        pass

    def result(self) -> None:
        return None

    def __enter__(self) -> "_Inline":
        return self

    def __exit__(self, *exc: object) -> None:
        pass


@pytest.fixture
def forking(monkeypatch: pytest.MonkeyPatch) -> None:
    """Children for any number of files, as on a machine of three cores."""
    monkeypatch.setattr(parallel, "FORK_FROM", 1)
    monkeypatch.setattr(parallel, "PER_CHILD", 1)
    monkeypatch.setattr(parallel, "cores", lambda: 3)


def _records(folder: Path) -> dict[str, object]:
    """The records kept under `folder`, but the time each verdict was reached and every byte was read."""
    found = {}
    for path in folder.glob("*.json"):
        record = json.loads(path.read_bytes())
        record.pop("checked", None)
        record.pop("read", None)
        found[path.name] = record
    return found


def _files(tmp_path: Path, count: int) -> list[Path]:
    paths = []
    for index in range(count):
        path = tmp_path / f"f{index}"
        path.write_bytes(f"file {index}\n".encode() * index)
        paths.append(path)
    return paths


def test_children_give_each_file_its_own_digest_and_leave_what_they_cannot_read(tmp_path: Path, forking: None) -> None:
    files = _files(tmp_path, 7)
    os.mkfifo(tmp_path / "fifo")  # would block a plain read: refused on the descriptor, left to the caller
    paths = [(str(p), p.stat().st_size) for p in files] + [(str(tmp_path / "fifo"), 0), (str(tmp_path / "gone"), 0)]
    with parallel.hash_ahead(paths) as ahead:
        digests = ahead.digests()
        assert ahead.digests() is digests  # asked twice: the children were read once
    assert digests == {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def _sized(paths: list[Path]) -> list[tuple[str, int]]:
    return [(str(p), p.stat().st_size) for p in paths]


def test_a_failed_child_is_no_digest_for_what_it_took(
    tmp_path: Path, forking: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    caller, real = os.getpid(), parallel._digest_or_nothing

    def fails_in_a_child(path: str) -> str:
        if os.getpid() != caller:
            raise RuntimeError("a bug in the child")
        return real(path)

    monkeypatch.setattr(parallel, "_digest_or_nothing", fails_in_a_child)
    files = _files(tmp_path, 8)
    with parallel.hash_ahead(_sized(files)) as ahead:
        for child in ahead._children:  # each dies on the first file of the share it takes (a file is a share here)
            assert child._child is not None
            _wait_until_ended(child._child[0])
        digests = ahead.digests()
    assert len(digests) == len(files) - 2  # the caller took the rest
    assert all(digests[str(p)] == hashlib.sha256(p.read_bytes()).hexdigest() for p in files if str(p) in digests)


def _wait_until_ended(pid: int) -> None:
    """Waits (5 s at most) until the child `pid` has ended, without reaping it."""
    for _ in range(500):
        if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return
        time.sleep(0.01)
    raise AssertionError(f"child {pid} still runs")


def test_the_biggest_files_go_first_each_alone_and_the_caller_takes_shares_too(tmp_path: Path, forking: None) -> None:
    small = _files(tmp_path, 50)
    big = tmp_path / "big"
    big.write_bytes(os.urandom(3 << 20))
    files = _sized([*small, big])
    with parallel.hash_ahead(files) as ahead:
        assert ahead._files[0] == (str(big), 3 << 20) and list(ahead._shares[0]) == [0]
        assert [size for _, size in ahead._files] == sorted((size for _, size in files), reverse=True)
        seen: list[tuple[int, int]] = []
        digests = ahead.digests(lambda done, total: seen.append((done, total)))
    assert digests == {path: hashlib.sha256(Path(path).read_bytes()).hexdigest() for path, _ in files}
    total = sum(size for _, size in files)
    assert all(t == total and 0 <= d <= total for d, t in seen)  # the shares the caller took, told as it took them


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=1 << 32), max_size=3000))
def test_shares_cover_every_file_once_in_order_within_the_pipe(sizes: list[int]) -> None:
    costs = [size + parallel.PER_FILE for size in sorted(sizes, reverse=True)]
    shares = parallel._shares(costs, sum(costs))
    assert [index for share in shares for index in share] == list(range(len(costs)))
    assert len(shares) <= parallel.MOST_SHARES and all(len(share) for share in shares)
    each = -(-sum(costs) // (parallel.MOST_SHARES - 1))
    assert all(sum(costs[i] for i in share) >= each for share in shares[:-1])


def test_a_block_left_early_takes_the_shares_away(
    tmp_path: Path, forking: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = parallel._digest_or_nothing

    def slow(path: str) -> str:
        time.sleep(0.01)
        return real(path)

    monkeypatch.setattr(parallel, "_digest_or_nothing", slow)
    files = _sized(_files(tmp_path, 300))  # each a share: 3 s of work, 1.5 s for two children
    started = time.monotonic()
    with parallel.hash_ahead(files) as ahead:
        assert sum(child.forked for child in ahead._children) == 2
    assert time.monotonic() - started < 1.0  # each child ended after the share it held


def test_children_never_asked_end_with_the_block(tmp_path: Path, forking: None) -> None:
    with parallel.hash_ahead(_sized(_files(tmp_path, 4))) as ahead:
        children = [child._child[0] for child in ahead._children if child._child is not None]
        assert len(children) == 2
    for pid in children:  # reaped by the block's end: no such child any more
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def test_no_child_beside_another_thread_or_for_few_files(
    tmp_path: Path, forking: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = _sized(_files(tmp_path, 4))
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        with parallel.hash_ahead(paths) as ahead:  # a lock the other thread holds would stay held in a child
            assert ahead.digests() == {}
    finally:
        stop.set()
        other.join()
    monkeypatch.setattr(parallel, "FORK_FROM", len(paths) + 1)
    with parallel.hash_ahead(paths) as ahead:
        assert ahead.digests() == {}


def test_a_check_read_by_children_is_the_check_read_by_itself(
    tmp_path: Path, forking: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    lock = make_lock(tmp_path, "1.0")
    prefix, _ = materialize(lock, None, tmp_path / "env", lambda _: None)
    read: list[str] = []
    real = prefix_observer.hash_files
    monkeypatch.setattr(
        prefix_observer,
        "hash_files",
        lambda files, progress=None: read.extend(p for p, _ in files) or real(files, progress),
    )
    records = tmp_path / "home" / "conformance"
    time.sleep(prefix_observer.RACY_NS / 1e9 + 0.05)  # settled: each first check keeps its fingerprints
    ahead = check_lock(lock, Prefix(prefix))
    assert ahead.clean and read == []  # every file read by the children, the record written by one
    kept = _records(records)
    assert len(kept) == 3  # the fingerprints, the verdict and when every byte was read
    shutil.rmtree(records)
    with monkeypatch.context() as inline:
        inline.setattr(parallel, "FORK_FROM", 10**9)
        inline.setattr(parallel, "Forked", _Inline)
        itself = check_lock(lock, Prefix(prefix))
    assert (
        read
        and {**itself.to_dict(), "read_every_byte": None} == {**ahead.to_dict(), "read_every_byte": None}
        and itself.hashes == ahead.hashes
    )
    assert _records(records) == kept
    target = prefix / "lib" / "libfoo.txt"
    before = target.stat()
    target.write_text("FOO 1.0\n")  # same size, mtime put back: only its bytes tell
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    read.clear()
    tampered = check_lock(lock, Prefix(prefix), full=True)
    assert read == [] and "libfoo 1.0: modified lib/libfoo.txt" in tampered.lines()


def test_forked_work_returns_its_text_and_a_failure_or_a_thread_returns_none() -> None:
    assert parallel.Forked(lambda: "done \u00e9").result() == "done \u00e9"

    def fails() -> str:
        raise RuntimeError("a bug in the child")

    assert parallel.Forked(fails).result() is None
    ran: list[str] = []
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert (
            parallel.Forked(lambda: ran.append("here") or "x").result() is None and ran == []
        )  # never run: the caller does it
    finally:
        stop.set()
        other.join()


def test_a_caller_interrupted_while_waiting_leaves_no_child_working(tmp_path: Path) -> None:
    """Ctrl-C while the caller waits for a child's text (a build waiting for its record): the child is ended and
    waited for before the interrupt goes on, so nothing it writes lands after (a build's temporary folder is
    removed next)."""
    import signal

    late = tmp_path / "written-late"

    def slow() -> str:
        time.sleep(1.5)
        late.write_text("after")
        return "done"

    def interrupt(*_: object) -> None:
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGALRM, interrupt)
    try:
        with pytest.raises(KeyboardInterrupt), parallel.Forked(slow) as child:
            assert child.forked
            signal.setitimer(signal.ITIMER_REAL, 0.3)
            child.result()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)  # no child of this process left, running or unreaped
    time.sleep(1.6)
    assert not late.exists()


def test_a_child_sent_sigterm_ends_at_once_though_lockgen_unwinds_on_it(tmp_path: Path) -> None:
    """`cli.main` makes SIGTERM unwind lockgen as Ctrl-C does; a forked child must not inherit that: the parent ends
    an unwanted child with SIGTERM and waits for it, and a child that unwound would run its work's clean-up (a
    kept-verdict pack finished and merged) while the parent waits, or, signalled before its `try`, the parent's."""
    import signal

    unwound = tmp_path / "unwound"

    def work() -> str:
        try:
            time.sleep(30)
        finally:
            unwound.write_text("the child ran its clean-up")
        return "done"

    def unwind(*_: object) -> None:
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGTERM, unwind)
    try:
        with parallel.Forked(work) as child:
            assert child.forked
            time.sleep(0.5)
            started = time.monotonic()
            child.stop()
            assert time.monotonic() - started < 5
    finally:
        signal.signal(signal.SIGTERM, before)
    assert not unwound.exists()


def test_fingerprints_kept_from_a_child_or_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    proofs = {"lib/a": [1, 2, 3, 4, 5, "ab" * 32]}
    with conformance_store.saving(tmp_path / "env", "0" * 64, proofs):
        pass
    assert conformance_store.load(tmp_path / "env", "0" * 64) == proofs
    monkeypatch.setattr(parallel.Forked, "result", lambda self: None)  # as when no child could be forked
    with conformance_store.saving(tmp_path / "env", "1" * 64, proofs):
        pass
    assert conformance_store.load(tmp_path / "env", "1" * 64) == proofs


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"cpu.max": "100000 100000\n"}, 1),  # fewer than this machine's two cores: one process
        ({"cpu.max": "200000 100000\n"}, 2),
        ({"cpu.max": "150000 100000\n"}, 2),  # 1.5 CPUs: two processes use them
        ({"cpu.max": "max 100000\n"}, None),
        ({"cpu.max": "garbage\n"}, None),
        ({"cpu/cpu.cfs_quota_us": "300000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 3),
        ({"cpu,cpuacct/cpu.cfs_quota_us": "-1\n", "cpu,cpuacct/cpu.cfs_period_us": "100000\n"}, None),
        ({}, None),
    ],
)
def test_the_cores_are_those_the_cgroup_quota_grants(
    tmp_path: Path, files: dict[str, str], expected: int | None
) -> None:
    """A container limited to a few CPUs on a big node gets a child per CPU it may use, not per core it sees."""
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert parallel._cpu_quota(str(tmp_path)) == expected
    seen = len(os.sched_getaffinity(0))
    parallel._cores.cache_clear()  # a passed test's tmp_path is removed, so the next one may get the same name
    assert parallel._cores(str(tmp_path)) == (min(seen, expected) if expected else seen)
