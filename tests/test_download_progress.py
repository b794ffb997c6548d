"""A long wheel download says how far it got (issue 44): `installing the wheels with uv: 10 s` said nothing of
bytes. While uv installs, a line every 10 s (stderr being a log here, not a terminal: lockgen's cadence for any
long tool run; 3 s on a terminal) says the bytes uv has unpacked into its cache so far and the rate since the
line before; the wheel comes from a loopback index that serves it at a known trickle, and uv itself downloads
and unpacks it."""

from __future__ import annotations

import functools
import http.server
import itertools
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO, _QuietHandler
from tests.wheel_index import Wheel, build_index

# about 3 MB stored (random hex in a zip that does not compress): 25 seconds at the trickle below
BIG = Wheel("bulky", "1.0", files={"bulky/blob.txt": os.urandom(3 << 19).hex()})
TRICKLE = 13 << 10  # bytes every tenth of a second: 130 KB/s
AMOUNT = r"([\d.]+ [kMG]B)"
LINE = re.compile(rf"installing the wheels with uv: (\d+) s, {AMOUNT} unpacked into uv's cache \({AMOUNT}/s\)")
UNITS = {"kB": 1e3, "MB": 1e6, "GB": 1e9}


def _bytes(amount: str) -> float:
    number, unit = amount.split()
    return float(number) * UNITS[unit]


class _Trickle(_QuietHandler):
    """Serves a wheel whole at TRICKLE per tenth of a second once `slow` is set; the index pages and a range
    request (lockgen reads a wheel's RECORD so) at once."""

    slow = threading.Event()

    def do_GET(self) -> None:
        if not self.path.endswith(".whl") or not self.slow.is_set() or self.headers.get("Range"):
            return super().do_GET()
        body = Path(self.translate_path(self.path)).read_bytes()
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            for start in range(0, len(body), TRICKLE):
                self.wfile.write(body[start : start + TRICKLE])
                self.wfile.flush()
                time.sleep(0.1)
        except OSError:  # uv left (a request it gave up for another)
            pass


@pytest.fixture
def slow_index(tmp_path: Path) -> Iterator[tuple[str, threading.Event]]:
    """The index's URL, and the switch that makes its wheel come slowly."""
    root = build_index(tmp_path / "index", [BIG])
    handler = type("Trickle", (_Trickle,), {"slow": threading.Event()})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/simple", handler.slow
    server.shutdown()


@pytest.mark.slow
def test_a_slow_wheel_download_says_its_bytes_and_rate(tmp_path: Path, slow_index: tuple[str, threading.Event]) -> None:
    """Resolved at full speed; materialized on a node of its own (another home, so uv's cache lacks the wheel)
    while the index trickles. Before: no line said bytes; then a line every 3 s, also on a log."""
    url, slow = slow_index
    stack = tmp_path / "stack" / "stack.toml"
    stack.parent.mkdir()
    stack.write_text(
        '[stack]\nname = "slow"\npython = "3.11"\nplatforms = ["linux-64"]\n[pypi-dependencies]\nbulky = "*"\n'
        f'[pypi-options]\nindex-url = "{url}"\n[targets.cpu]\narch = "cpu"\n'
    )
    env = {**os.environ, "NO_COLOR": "1", "LOCKGEN_HOME": str(tmp_path / "home")}
    lockgen = [sys.executable, "-m", "lockgen"]
    resolved = subprocess.run([*lockgen, "resolve", str(stack)], capture_output=True, text=True, env=env, cwd=REPO)
    assert resolved.returncode == 0, resolved.stderr
    lock = stack.parent / "locks" / "cpu.conda-lock.yml"
    env["LOCKGEN_HOME"] = str(tmp_path / "node")
    slow.set()
    started = time.monotonic()
    done = subprocess.run(
        [*lockgen, "materialize", str(lock), "--prefix", str(tmp_path / "env")],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
    )
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    said = [LINE.search(line) for line in done.stderr.splitlines() if "installing the wheels with uv:" in line]
    found = [m for m in said if m is not None]
    assert len(found) == len(said) >= 2, done.stderr  # every line says bytes and a rate
    seconds = [int(m[1]) for m in found]
    assert all(later - earlier >= 9 for earlier, later in itertools.pairwise(seconds)), seconds
    assert len(found) <= took / 10 + 1, (took, done.stderr)  # a line per 10 s, not more
    unpacked = [_bytes(m[2]) for m in found]
    assert unpacked == sorted(unpacked) and 0 < unpacked[-1] <= 3.2e6, done.stderr
    rates = [_bytes(m[3]) for m in found[1:]]  # the first may fall before uv wrote much
    assert all(0 < rate < 2e6 for rate in rates), done.stderr  # near the trickle's 0.13 MB/s, nowhere near a disk's


def test_uv_s_unpacking_folders_there_before_the_install_are_not_counted(tmp_path: Path) -> None:
    """A killed run's `.tmp*` folder in uv's cache (or another run's) was counted as this install's bytes."""
    from lockgen.adapters.store.installers import CacheGrowth

    leftover = tmp_path / ".tmpLEFT"
    leftover.mkdir()
    (leftover / "part.bin").write_bytes(b"x" * 5000)
    growth = CacheGrowth(tmp_path)
    assert growth.written() == 0 and growth.said() == ""
    ours = tmp_path / ".tmpOURS"
    ours.mkdir()
    (ours / "part.bin").write_bytes(b"y" * 2000)
    assert growth.written() == 2000
    archive = tmp_path / "archive-v0" / "abc"
    archive.mkdir(parents=True)
    (archive / "mod.py").write_bytes(b"z" * 1000)
    assert growth.written() == 3000


def test_the_install_line_comes_every_10_s_on_a_log(monkeypatch: pytest.MonkeyPatch) -> None:
    """3 s on any stream was 400 lines in a 20-minute install written to a log."""
    from lockgen.adapters.store import transfer_progress

    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    assert transfer_progress.heartbeat_s() == 10.0
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert transfer_progress.heartbeat_s() == 3.0


class _TrickleArchive(http.server.BaseHTTPRequestHandler):
    """Serves ARCHIVE in tenths of its size, 50 ms apart, stating its size (Content-Length) or not (`/unsized/`)."""

    def do_GET(self) -> None:
        self.send_response(200)
        if not self.path.startswith("/unsized/"):
            self.send_header("Content-Length", str(len(ARCHIVE)))
        self.end_headers()
        for start in range(0, len(ARCHIVE), len(ARCHIVE) // 10):
            self.wfile.write(ARCHIVE[start : start + len(ARCHIVE) // 10])
            self.wfile.flush()
            time.sleep(0.05)

    def log_message(self, *_: object) -> None:
        pass


ARCHIVE = os.urandom(2_000_000)
FETCHING = re.compile(rf"fetching `blob` 1\.0: {AMOUNT}( of 2\.0 MB)? \({AMOUNT}/s\)")


@pytest.mark.parametrize("sized", [True, False], ids=["content-length", "no-size"])
def test_a_slow_conda_download_says_its_bytes_of_its_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sized: bool
) -> None:
    """Before: a conda package's download said nothing until it was whole (then `fetched N conda packages`, a
    count), though a CUDA package is a gigabyte. Now a line each heartbeat says the bytes so far, of the size the
    server states."""
    import hashlib

    from lockgen.adapters.store import package_store, transfer_progress
    from lockgen.model.lock import LockedPackage, PackageHash

    monkeypatch.setattr(transfer_progress, "heartbeat_s", lambda: 0.1)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _TrickleArchive)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    folder = "sized" if sized else "unsized"
    url = f"http://127.0.0.1:{server.server_address[1]}/{folder}/blob-1.0-0.conda"
    package = LockedPackage(
        name="blob",
        version="1.0",
        manager="conda",
        platform="linux-64",
        url=url,
        hash=PackageHash(sha256=hashlib.sha256(ARCHIVE).hexdigest()),
    )
    lines: list[str] = []
    try:
        stored = package_store.fetch(package, tmp_path / "pkgs", progress=lines.append)
    finally:
        server.shutdown()
    assert stored.read_bytes() == ARCHIVE
    found = [FETCHING.fullmatch(line) for line in lines]
    assert len(found) >= 2 and all(found), lines
    assert all(bool(m[2]) == sized for m in found if m), lines  # `of 2.0 MB` only where the size is stated
    fetched = [_bytes(m[1]) for m in found if m]
    assert fetched == sorted(fetched) and 0 < fetched[-1] <= 2e6, lines
