"""Shared fixtures: the shared folder (snapshot, corpus, facts), tiny real channels, CLI runners."""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.channel_factory import build_channel, gpu_channel_packages

REPO = Path(__file__).resolve().parent.parent
EXAMPLE_STACK = REPO / "envs" / "examples" / "pytorch-cuda" / "stack.toml"


SNAPSHOT = REPO / "envs" / "examples" / "conda-forge-snapshot"  # the offline conda index, committed


def shared_path() -> Path:
    return Path(os.environ.get("LOCKGEN_SHARED") or REPO.parent / "shared")


def has_shared() -> bool:
    """Whether the team's `../shared` (or `$LOCKGEN_SHARED`) is here: the corpus of public locks and the
    sourced GPU matrix live there, not in the repository."""
    return (shared_path() / "corpus").is_dir()


NEEDS_SHARED = (
    "needs the team's shared folder (the public-lock corpus or the GPU matrix) at ../shared or $LOCKGEN_SHARED; the "
    "repository alone runs every other test"
)


def shared_dir() -> Path:
    """`$LOCKGEN_SHARED`, else `../shared` beside the repository; a test that needs it is skipped, saying
    why, where it is absent (the one skip the suite allows)."""
    if not has_shared():
        pytest.skip(NEEDS_SHARED)
    return shared_path()


@pytest.fixture(scope="session")
def snapshot() -> Path:
    return SNAPSHOT


@pytest.fixture(scope="session")
def gpu_channel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_channel(tmp_path_factory.mktemp("gpu-channel"), gpu_channel_packages())


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test runs with a temporary lockgen home and cache (a test may set its own), never the user's."""
    monkeypatch.setenv("LOCKGEN_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))
    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path_factory.getbasetemp() / "lockgen-home"))
    monkeypatch.delenv("LOCKGEN_CHANNEL_ALIAS", raising=False)


_TESTS_HOME = "LOCKGEN_TESTS_HOME"  # the session's HOME: made by the first process, inherited by xdist's workers


def _session_home(temporary: Path) -> Path:
    """A HOME for the whole session holding a link to each entry of the user's home but `.lockgen` (their git
    identity, uv's Pythons, caches and container settings reach the tests as before), so nothing the suite runs
    can reach the user's ~/.lockgen, whatever LOCKGEN_HOME a test sets or unsets; and another process using the
    user's ~/.lockgen meanwhile is no failure of the suite's."""
    home = temporary / "user-home"
    home.mkdir()
    real = Path.home()
    for entry in real.iterdir() if real.is_dir() else ():
        if entry.name != ".lockgen":
            (home / entry.name).symlink_to(entry)
    return home


def _written_lockgen_home(home: Path) -> list[str]:
    """The files a test wrote into the session HOME's `.lockgen` (a lockgen run that fell back on ~/.lockgen)."""
    root = home / ".lockgen"
    return sorted(str(path.relative_to(root)) for path in root.rglob("*") if not path.is_dir()) if root.is_dir() else []


def pytest_sessionstart(session: pytest.Session) -> None:
    """A temporary lockgen home, lockgen cache and uv cache for the whole session, before any fixture
    (module-scoped ones run before the per-test one above), and a HOME without the user's ~/.lockgen (made once:
    xdist's workers start after this hook and inherit it)."""
    temporary = Path(tempfile.mkdtemp(prefix="lockgen-tests-"))
    session.config.stash[_TEMP_KEY] = temporary
    if _TESTS_HOME not in os.environ:
        home = _session_home(temporary)
        session.config.stash[_HOME_KEY] = home
        os.environ["HOME"] = os.environ[_TESTS_HOME] = str(home)
    os.environ["LOCKGEN_HOME"] = str(temporary / "home")
    os.environ["LOCKGEN_CACHE_DIR"] = str(temporary / "cache")
    # uv's cache too: wheels installed from per-test file:// paths (the CPU torch wheel, 700 MB unpacked) were
    # kept in the user's ~/.cache/uv under a new entry each run (67 GB on this machine after some sessions)
    os.environ["UV_CACHE_DIR"] = str(temporary / "uv-cache")
    # the tests' local channels and wheels live in temporary folders and the repository's fixtures: the roots
    # a lock's file: URLs may name (lockgen reads no other local file a lock names)
    os.environ["LOCKGEN_FILE_ROOTS"] = os.pathsep.join([tempfile.gettempdir(), str(REPO)])


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    home = session.config.stash.get(_HOME_KEY, None)
    written = _written_lockgen_home(home) if home is not None else []
    if _TEMP_KEY in session.config.stash:
        shutil.rmtree(session.config.stash[_TEMP_KEY], ignore_errors=True)
    if written:
        session.exitstatus = 1
        shown = ", ".join(written[:10]) + (f" and {len(written) - 10} more" if len(written) > 10 else "")
        print(
            "\nFAILED: tests wrote into ~/.lockgen (a lockgen run without LOCKGEN_HOME; tests must use a "
            f"temporary home): {shown}"
        )


_HOME_KEY = pytest.StashKey[Path]()
_TEMP_KEY = pytest.StashKey[Path]()


def unsealed(lock_text: str) -> str:
    """A lock's text without its `lockgen.package-set.*` records, as an older lockgen wrote it, or as one who edits
    its entries would leave it to get past that check: what the tests of the deeper defenses (an archive's own
    metadata, the pinned hashes) edit, since the record guards against hand edits, not against an attacker."""
    return "".join(
        line for line in lock_text.splitlines(keepends=True) if not line.lstrip().startswith("lockgen.package-set.")
    )


def run_cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Runs the real `lockgen` entry point in a subprocess (exit codes and stderr as users see them);
    `env` adds to (or overrides) this process's environment."""
    full = {**os.environ, "NO_COLOR": "1", **(env or {})}
    return subprocess.run([sys.executable, "-m", "lockgen", *args], capture_output=True, text=True, cwd=cwd, env=full)


@pytest.fixture
def example_copy(tmp_path: Path) -> Path:
    """A copy of the example stack folder without its locks."""
    target = tmp_path / "pytorch-cuda"
    shutil.copytree(EXAMPLE_STACK.parent, target, ignore=shutil.ignore_patterns("locks"))
    return target / "stack.toml"


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def http_channel():
    """Serves folders over HTTP on loopback (a stand-in for a live channel); returns a function folder -> URL."""
    servers = []

    def serve(folder: Path) -> str:
        handler = functools.partial(_QuietHandler, directory=str(folder))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield serve
    for server in servers:
        server.shutdown()


@contextlib.contextmanager
def loopback_registry(folder: Path) -> Iterator[str]:
    """Debian's distribution registry (`docker-registry`, 2.8: no referrers API) on 127.0.0.1, port picked
    by the registry, its storage and log under `folder`; yields HOST:PORT and stops it afterwards."""
    binary = shutil.which("docker-registry")
    if binary is None:
        pytest.fail("docker-registry is not installed: .ci/run installs it with apt-get")
    config = folder / "registry.yml"
    config.write_text(
        "version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n    rootdirectory: "
        f"{folder / 'data'}\nhttp:\n  addr: 127.0.0.1:0\n"
    )
    log_path = folder / "registry.log"
    with log_path.open("w") as log:
        process = subprocess.Popen([binary, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT)
    try:
        found = None
        for _ in range(600):  # 30 s at most: 5 s was too little on two cores busy with another suite
            found = re.search(r"listening on 127\.0\.0\.1:(\d+)", log_path.read_text())
            if found or process.poll() is not None:
                break
            time.sleep(0.05)
        if not found:
            pytest.fail("the registry did not start: " + log_path.read_text()[-500:])
        yield f"127.0.0.1:{found.group(1)}"
    finally:
        process.terminate()
        process.wait(timeout=10)


def signals_as_from_a_terminal() -> None:
    """SIGINT, SIGHUP and SIGTERM at their defaults in the child, as a terminal starts a command: a suite run in
    the background (`cmd &`, nohup) ignores SIGINT or SIGHUP, an ignored signal stays ignored across exec, and
    a non-interactive sh cannot trap a signal ignored on entry (POSIX), whatever lockgen does; Python turns SIGINT into
    KeyboardInterrupt only where it was not ignored at start."""
    for number in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(number, signal.SIG_DFL)
