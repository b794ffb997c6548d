"""The suite's own guards, run on a small session of their own: the home guard names what a test wrote into
~/.lockgen and ignores what other processes do to the user's; large fixtures leave no gigabytes behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

_WRITES = """
import os
from pathlib import Path


def test_writes():
    (Path.home() / ".lockgen").mkdir(exist_ok=True)
    (Path.home() / ".lockgen" / "left-by-a-test").write_text("x")


def test_another_process_writes():
    (Path(os.environ["REAL_HOME"]) / ".lockgen" / "another-process").write_text("x")
"""


def _session(tmp_path: Path, selected: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """pytest with the suite's conftest as a plugin over one test of `_WRITES`, the user's home being `real`."""
    real = tmp_path / "real-home"
    (real / ".lockgen" / "kept").mkdir(parents=True)
    (real / ".gitconfig").write_text("[user]\n")
    (tmp_path / "test_planted.py").write_text(_WRITES)
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTEST_", "LOCKGEN_"))}
    env.update({"HOME": str(real), "REAL_HOME": str(real), "PYTHONPATH": str(REPO)})
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "tests.conftest",
        "-n",
        "0",
        "--rootdir",
        str(tmp_path),
        f"test_planted.py::{selected}",
    ]
    return subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120), real


def test_the_home_guard_names_what_a_test_wrote(tmp_path: Path) -> None:
    """A test that falls back on ~/.lockgen fails the run, naming the file; the user's own home is untouched."""
    done, real = _session(tmp_path, "test_writes")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "tests wrote into ~/.lockgen" in done.stdout and "left-by-a-test" in done.stdout
    assert sorted(p.name for p in (real / ".lockgen").iterdir()) == ["kept"]


def test_the_home_guard_ignores_other_processes(tmp_path: Path) -> None:
    """Another process writing to the user's ~/.lockgen during a green run is no failure of the suite's (before,
    the guard compared the user's home before and after and failed the run without naming a file)."""
    done, real = _session(tmp_path, "test_another_process_writes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (real / ".lockgen" / "another-process").is_file()
