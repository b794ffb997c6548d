"""Hashing many files fast: files of 1 MiB and more on a pool of threads (sha256 releases the GIL on big
blocks), small ones in the calling thread meanwhile, with plain `os.read` (measured on 60,000 files of
1 KiB: threads made small files slower, 0.84 s against 0.37 s serial, and `os.read` beat buffered reads,
0.23 s). Every file is read as one of a prefix lockgen does not trust (`file_digest(follow=False)`).

Small files are mostly Python's work per file (an open, a stat, two reads, a close), which threads cannot
share: `hash_ahead` hashes them in child processes (forked, so nothing is imported or pickled but the
digests coming back), one per other core, while the caller goes on with its own work (a check reads the lock's
manifests meanwhile). A child's digest is a file's bytes when the child read it, after the caller's stat walk,
as the caller's own read would be; a file a child could not read is left to the caller, who meets the error."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache, partial
from types import TracebackType

from lockgen.digests import file_digest

BIG = 1 << 20
FORK_FROM = 2000  # fewer small files than this are hashed by the caller: a child would cost about what it saves
PER_CHILD = 1000  # at least this many files for each child


def hash_files(files: Sequence[tuple[str, int]], progress: Callable[[int, int], None] | None = None) -> dict[str, str]:
    """sha256 of each `(path, size)`; `progress(bytes done, bytes total)` as the big files finish."""
    big = sorted((item for item in files if item[1] >= BIG), key=lambda item: -item[1])
    small = [path for path, size in files if size < BIG]
    total = sum(size for _, size in files) or 1
    digests: dict[str, str] = {}
    with ThreadPoolExecutor(max_workers=max(1, min(32, cores()))) as pool:
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


class Forked:
    """`work` run in a forked child process (only where forking is safe: no other thread runs, whose locks would
    stay held in the child); `result()` waits for the text it returned, None when the child failed or none was
    forked (none is where a pipe or a fork fails too; then `work` never ran: the caller does it). Nothing is pickled: the child has the caller's memory
    and sends back text. A context manager: leaving it ends a child never asked (its pipe closes)."""

    def __init__(self, work: Callable[[], str]) -> None:
        self._child: tuple[int, int] | None = None  # its pid, the read end of its pipe
        self._result: str | None = None
        if not hasattr(os, "fork") or threading.active_count() > 1:
            return
        try:
            read, write = os.pipe()
        except OSError:  # no descriptor to be had (a low `ulimit -n`): the caller does the work
            return
        try:
            pid = os.fork()
        except OSError:  # no process to be had (a cgroup's pids limit, no memory): the caller does the work
            os.close(read)
            os.close(write)
            return
        if pid == 0:  # the child: runs `work`, writes its text, ends without running the caller's code
            code = 1
            try:
                os.close(read)
                for other in _READING:  # other children's pipes: theirs to end
                    os.close(other)
                with os.fdopen(write, "wb") as stream:
                    stream.write(work().encode("utf-8", "surrogateescape"))
                code = 0
            finally:
                os._exit(code)
        os.close(write)
        _READING.add(read)
        self._child = (pid, read)

    def result(self) -> str | None:
        if self._child is not None:
            pid, read = self._child
            self._child = None
            _READING.discard(read)
            with os.fdopen(read, "rb") as stream:
                text = stream.read().decode("utf-8", "surrogateescape")
            if os.waitpid(pid, 0)[1] == 0:  # exit 0 only after the whole text was written
                self._result = text
        return self._result

    def __enter__(self) -> Forked:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        if self._child is not None:  # never asked: the child meets a closed pipe and ends
            pid, read = self._child
            self._child = None
            _READING.discard(read)
            os.close(read)
            os.waitpid(pid, 0)


_READING: set[int] = set()  # read ends of this process's live children's pipes


class HashedAhead:
    """Files being hashed by child processes; `digests()` waits for them. Used as a context manager, so a
    caller that stops early (an error) ends its children instead of leaving them blocked on their pipes."""

    def __init__(self, children: list[tuple[Forked, Sequence[str]]]) -> None:
        self._children = children  # each child and the paths it hashes
        self._digests: dict[str, str] | None = None

    def digests(self) -> dict[str, str]:
        """path -> sha256 of every file a child read (one it could not read, or a child that failed, is absent)."""
        if self._digests is None:
            self._digests = {}
            for child, paths in self._children:
                lines = (child.result() or "").split("\n")
                if len(lines) == len(paths):
                    self._digests.update((path, digest) for path, digest in zip(paths, lines) if digest)
        return self._digests

    def __enter__(self) -> HashedAhead:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        for child, _ in self._children:
            child.__exit__(kind, error, trace)


def hash_ahead(paths: Sequence[str]) -> HashedAhead:
    """Starts hashing the small files `paths` (each under `BIG`) in child processes, one per core beside the
    caller's (none when they are few, or on one core; see `Forked` for where none is forked)."""
    children = min(cores() - 1, len(paths) // PER_CHILD) if len(paths) >= FORK_FROM else 0
    shares = [paths[index * len(paths) // children : (index + 1) * len(paths) // children] for index in range(children)]
    return HashedAhead([(Forked(partial(_hashed, share)), share) for share in shares])


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
        quota, period = _words(os.path.join(root, folder, "cpu.cfs_quota_us")), _words(os.path.join(root, folder, "cpu.cfs_period_us"))
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


def _hashed(paths: Sequence[str]) -> str:
    return "\n".join(map(_digest_or_nothing, paths))


def _digest_or_nothing(path: str) -> str:
    try:
        return file_digest(path, follow=False)
    except OSError:
        return ""
