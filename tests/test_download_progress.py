"""A long wheel download says how far it got (issue 44): `installing the wheels with uv: 10 s` said nothing of
bytes. While uv installs, a line every few seconds (never more often, stderr being a log here, not a terminal)
says the bytes uv has unpacked into its cache so far and the rate since the line before; the wheel comes from a
loopback index that serves it at a known trickle, and uv itself downloads and unpacks it."""

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

# about 3 MB stored (random hex in a zip that does not compress): ten seconds at the trickle below
BIG = Wheel("bulky", "1.0", files={"bulky/blob.txt": os.urandom(3 << 19).hex()})
TRICKLE = 32 << 10  # bytes every tenth of a second: 320 KB/s
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
    while the index trickles. Before: no line in the ten seconds (one each ten), and none said bytes."""
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
    assert all(later - earlier >= 2 for earlier, later in itertools.pairwise(seconds)), seconds
    assert len(found) <= took / 3 + 1, (took, done.stderr)  # a line per few seconds, not more
    unpacked = [_bytes(m[2]) for m in found]
    assert unpacked == sorted(unpacked) and 0 < unpacked[-1] <= 3.2e6, done.stderr
    rates = [_bytes(m[3]) for m in found[1:]]  # the first may fall before uv wrote much
    assert all(0 < rate < 2e6 for rate in rates), done.stderr  # near the trickle's 0.3 MB/s, nowhere near a disk's
