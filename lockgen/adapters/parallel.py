"""Hashing many files fast: files of 1 MiB and more on a pool of threads (sha256 releases the GIL on big
blocks), small ones in the calling thread meanwhile, with plain `os.read` (measured on 60,000 files of
1 KiB: threads made small files slower, 0.84 s against 0.37 s serial, and `os.read` beat buffered reads,
0.23 s). Every file is read as one of a prefix lockgen does not trust (`file_digest(follow=False)`).

Small files are mostly Python's work per file (an open, a stat, two reads, a close), which threads cannot
share: `hash_ahead` hashes a whole tree's files, big and small, in child processes (forked, so nothing is
imported or pickled but the digests coming back), one per other core, while the caller goes on with its own
work (a check reads the lock's manifests meanwhile) and then takes its part: the biggest files are handed out
first, so the longest single hash starts at once instead of after every small file. A child's digest is a
file's bytes when the child read it, after the caller's stat walk, as the caller's own read would be; a file a child
could not read is left to the caller, who meets the error."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from functools import lru_cache, partial
from itertools import accumulate
from types import TracebackType

from lockgen.digests import file_digest

BIG = 1 << 20
PER_FILE = (
    64 << 10
)  # what a file costs beside its bytes (an open, a stat, a close: about 30 µs), in bytes hashed meanwhile
FORK_FROM = 2000  # work of fewer small files than this is hashed by the caller: a child would cost about what it saves
PER_CHILD = 1000  # at least this many small files' work for each child
MOST_SHARES = 1024  # work is handed out in at most this many shares, 4 bytes each: one write to the pipe


def hash_files(files: Sequence[tuple[str, int]], progress: Callable[[int, int], None] | None = None) -> dict[str, str]:
    """sha256 of each `(path, size)`; `progress(bytes done, bytes total)` as the big files finish."""
    big = sorted((item for item in files if item[1] >= BIG), key=lambda item: -item[1])
    small = [path for path, size in files if size < BIG]
    total = sum(size for _, size in files) or 1
    digests: dict[str, str] = {}
    with contextlib.ExitStack() as stack:
        pending: Iterator[str] = iter(())
        if big:  # futures and logging (3 ms): not for a walk that only forks, nor for small files alone
            from concurrent.futures import ThreadPoolExecutor

            pool = stack.enter_context(ThreadPoolExecutor(max_workers=max(1, min(32, cores()))))
            pending = pool.map(lambda item: file_digest(item[0], follow=False), big)
        for path in small:
            digests[path] = file_digest(path, follow=False)
        done = sum(size for _, size in files if size < BIG)
        for (path, size), digest in zip(big, pending):
            digests[path] = digest
            done += size
            if progress is not None:
                progress(done, total)
    if progress is not None:
        progress(total, total)
    return digests


_STOPPING = {signal.SIGTERM, signal.SIGHUP}


def _stopping_at_defaults() -> None:
    """In a forked child: SIGTERM and SIGHUP end it at once, as they did before `cli.main` made them unwind lockgen
    (the parent, which sends the child SIGTERM when its work is not wanted, cleans up; a child that unwound would
    finish its work's own clean-up first, or, signalled before its `try`, run the parent's). One the parent
    ignores (SIGHUP under nohup) stays ignored."""
    for number in _STOPPING:
        if signal.getsignal(number) is not signal.SIG_IGN:
            signal.signal(number, signal.SIG_DFL)


class Forked:
    """`work` run in a forked child process (only where forking is safe: no other thread runs, whose locks would
    stay held in the child); `result()` waits for the text it returned (`data()`: its bytes, for work that returns
    bytes), None when the child failed or none was forked (none is where a pipe or a fork fails too; then `work`
    never ran: the caller does it). Nothing is pickled: the child has the caller's memory and sends back text or
    bytes. A context manager: leaving it ends a child never asked (its pipe closes)."""

    def __init__(self, work: Callable[[], str | bytes]) -> None:
        self._child: tuple[int, int] | None = None  # its pid, the read end of its pipe
        self._result: bytes | None = None
        if not hasattr(os, "fork") or threading.active_count() > 1:
            return
        try:
            read, write = os.pipe()
        except OSError:  # no descriptor to be had (a low `ulimit -n`): the caller does the work
            return
        held = signal.pthread_sigmask(signal.SIG_BLOCK, _STOPPING)  # none may reach the child before it is reset
        try:
            pid = os.fork()
        except OSError:  # no process to be had (a cgroup's pids limit, no memory): the caller does the work
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
            os.close(read)
            os.close(write)
            return
        if pid == 0:  # the child: runs `work`, writes its text, ends without running the caller's code
            _stopping_at_defaults()
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
            code = 1
            try:
                os.close(read)
                for other in _READING:  # other children's pipes: theirs to end
                    os.close(other)
                with os.fdopen(write, "wb") as stream:
                    payload = work()
                    stream.write(payload if isinstance(payload, bytes) else payload.encode("utf-8", "surrogateescape"))
                code = 0
            finally:
                os._exit(code)
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        os.close(write)
        _READING.add(read)
        self._child = (pid, read)

    @property
    def forked(self) -> bool:
        """A child runs `work` and has not been asked for its text yet."""
        return self._child is not None

    def result(self) -> str | None:
        data = self.data()
        return data.decode("utf-8", "surrogateescape") if data is not None else None

    def data(self) -> bytes | None:
        if self._child is not None:
            pid, read = self._child
            self._child = None
            _READING.discard(read)
            try:
                with os.fdopen(read, "rb") as stream:
                    data = stream.read()
            except BaseException:  # interrupted (Ctrl-C) while the child works: ended and waited for, never left
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGTERM)
                os.waitpid(pid, 0)
                raise
            if os.waitpid(pid, 0)[1] == 0:  # exit 0 only after the whole text was written
                self._result = data
        return self._result

    def stop(self) -> None:
        """Ends the child now (its work is not wanted: the caller failed or was interrupted) and waits for it."""
        if self._child is not None:
            pid, read = self._child
            self._child = None
            _READING.discard(read)
            os.close(read)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
            os.waitpid(pid, 0)

    def __enter__(self) -> Forked:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._child is not None:  # never asked: the child meets a closed pipe and ends
            pid, read = self._child
            self._child = None
            _READING.discard(read)
            os.close(read)
            os.waitpid(pid, 0)


_READING: set[int] = set()  # read ends of this process's live children's pipes


class HashedAhead:
    """Files being hashed by child processes, each taking the next share of them from one pipe of share
    numbers; `digests()` has the caller take shares too, then waits for the children. Used as a context
    manager, so a caller that stops early (an error) empties the pipe and ends its children instead of leaving
    them hashing or blocked on their pipes."""

    def __init__(self, files: Sequence[tuple[str, int]], shares: list[range], children: int) -> None:
        self._files, self._shares = files, shares
        self._queue: int | None = None  # the read end of the pipe of share numbers, while children may read it
        self._children: list[Forked] = []
        self._digests: dict[str, str] | None = None
        if children < 1:
            return
        self._queue = share_numbers(len(shares))
        if self._queue is None:  # no descriptor to be had: nothing hashed ahead, the caller hashes all
            return
        self._children = [Forked(partial(self._taken, None)) for _ in range(children)]

    def _taken(self, progress: Callable[[int, int], None] | None) -> str:
        """Shares hashed until the pipe of their numbers is empty: a line `index digest` for each file read (one
        that could not be read is left out)."""
        assert self._queue is not None
        lines: list[str] = []
        before = list(accumulate((size for _, size in self._files), initial=0)) if progress is not None else []
        for number in taken_shares(self._queue):
            share = self._shares[number]
            if progress is not None:
                progress(before[share.start], before[-1] or 1)
            for index in share:
                digest = _digest_or_nothing(self._files[index][0])
                if digest:
                    lines.append(f"{index} {digest}")
        return "\n".join(lines)

    def digests(self, progress: Callable[[int, int], None] | None = None) -> dict[str, str]:
        """path -> sha256 of every file this process or a child read (one that could not be read, or that a
        failed child took, is absent); `progress(bytes, total)` as this process takes a share (the bytes
        before it were taken by someone). None is hashed here when no child could be forked: the caller
        hashes them its own way (`hash_files`, big files on threads)."""
        if self._digests is None:
            self._digests = {}
            texts = (
                [self._taken(progress), *(child.result() or "" for child in self._children)]
                if any(child.forked for child in self._children)
                else []
            )
            self._close()
            for text in texts:
                for line in filter(None, text.split("\n")):
                    index, _, digest = line.partition(" ")
                    self._digests[self._files[int(index)][0]] = digest
        return self._digests

    def _close(self) -> None:
        if self._queue is not None:
            os.close(self._queue)
            self._queue = None

    def __enter__(self) -> HashedAhead:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._queue is not None:  # never asked: the shares left are taken away, so each child ends after its own
            while os.read(self._queue, 4096):  # the write end is closed: the shares, then the end, never a wait
                pass
        for child in self._children:
            child.__exit__(kind, error, trace)
        self._close()


def share_numbers(count: int) -> int | None:
    """The read end of a pipe holding the share numbers 0 .. `count` - 1 (`count` <= `MOST_SHARES`: one write
    within PIPE_BUF), its write end closed, for this process and its forked children to take from
    (`taken_shares`); None where no pipe can be had (a low `ulimit -n`): the caller does all the work."""
    try:
        read, write = os.pipe()
    except OSError:
        return None
    os.write(write, b"".join(share.to_bytes(4, "little") for share in range(count)))
    os.close(write)
    return read


class ShareNumbers:
    """Share numbers 0 .. `count` - 1 for this process and the children it forks next to take, each once, in
    order, whoever is free taking the next (`taken`): from a pipe (`share_numbers`), or, where none can be had,
    all of them by this process alone (then fork no child). A context manager: leaving it closes the pipe."""

    def __init__(self, count: int) -> None:
        self._count = count
        self._queue = share_numbers(count)

    @property
    def shared(self) -> bool:
        """Whether forked children can take shares too (the pipe was made)."""
        return self._queue is not None

    def taken(self) -> Iterator[int]:
        if self._queue is None:
            yield from range(self._count)
        else:
            yield from taken_shares(self._queue)

    def __enter__(self) -> ShareNumbers:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._queue is not None:
            os.close(self._queue)
            self._queue = None


def taken_shares(queue: int) -> Iterator[int]:
    """The next share number from the pipe `queue` until it is empty (a read of 4 bytes from a pipe is whole)."""
    while len(record := os.read(queue, 4)) == 4:
        yield int.from_bytes(record, "little")


def hash_ahead(files: Sequence[tuple[str, int]]) -> HashedAhead:
    """Starts hashing `files` (path, size) in child processes, one per core beside the caller's (none when they
    are few, or on one core; see `Forked` for where none is forked). The files are cut into at most
    `MOST_SHARES` shares of about the same cost (bytes, and `PER_FILE` for each file), the biggest files first,
    each alone when it costs more than a share: whoever is free takes the next, so the biggest file starts at
    once and the small ones fill in around it."""
    ordered = sorted(files, key=lambda item: -item[1])
    costs = [size + PER_FILE for _, size in ordered]
    total = sum(costs)
    shares = _shares(costs, total)
    children = min(cores() - 1, len(shares), total // (PER_CHILD * PER_FILE)) if total >= FORK_FROM * PER_FILE else 0
    return HashedAhead(ordered, shares, children)


def _shares(costs: list[int], total: int) -> list[range]:
    """Consecutive runs of `costs`, each closed when it reaches a share's cost: at most `MOST_SHARES` runs (each
    closed one costs a share or more, and the last may be open)."""
    share = max(1, -(-total // (MOST_SHARES - 1)))
    runs, start, cost = [], 0, 0
    for index, each in enumerate(costs):
        cost += each
        if cost >= share:
            runs.append(range(start, index + 1))
            start, cost = index + 1, 0
    if start < len(costs):
        runs.append(range(start, len(costs)))
    return runs


def cores() -> int:
    """The cores this process may run on: its affinity (a cpuset or `taskset` gives fewer than the machine has),
    and no more than its cgroup's CPU quota allows (a container limited to 2 CPUs on a 128-core node, a
    Kubernetes pod's `limits.cpu`: a child per core there would be 127 processes sharing 2 CPUs)."""
    return _cores(CGROUP_ROOT)


CGROUP_ROOT = "/sys/fs/cgroup"


@lru_cache(maxsize=None)
def _cores(root: str) -> int:
    allowed = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    quota = _cpu_quota(root)
    return max(1, min(allowed, quota)) if quota is not None else allowed


def _cpu_quota(root: str) -> int | None:
    """The whole CPUs a cgroup quota grants, rounded up (cgroup v2 `cpu.max`, v1 `cpu.cfs_quota_us` over
    `cpu.cfs_period_us`, of this process's own cgroup as a container sees it), None where none is set or
    none can be read."""
    v2 = _words(os.path.join(root, "cpu.max"))
    if v2 is not None:
        return _whole(v2[0], v2[1]) if len(v2) == 2 else None
    for folder in ("cpu", "cpu,cpuacct"):
        quota, period = (
            _words(os.path.join(root, folder, "cpu.cfs_quota_us")),
            _words(os.path.join(root, folder, "cpu.cfs_period_us")),
        )
        if quota and period:
            return _whole(quota[0], period[0])
    return None


def _words(path: str) -> list[str] | None:
    try:
        with open(path, encoding="ascii") as stream:
            return stream.read(256).split()
    except (OSError, ValueError):
        return None


def _whole(quota: str, period: str) -> int | None:
    """`quota` over `period` microseconds as whole CPUs, rounded up; None for no limit (`max`, -1) or nonsense."""
    try:
        us, every = int(quota), int(period)
    except ValueError:
        return None
    return -(-us // every) if us > 0 and every > 0 else None


def _digest_or_nothing(path: str) -> str:
    try:
        return file_digest(path, follow=False)
    except OSError:
        return ""
