"""The folders a command names are absolute once parsed (`model.requests`): a package's placeholders and
launchers name the absolute prefix, so `--prefix env` and `--from-prefix env` must mean `/cwd/env` (the relative
check itself: test_materialize's `test_a_relative_prefix_is_checked_as_the_folder_it_names`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from lockgen.model.requests import FromPrefix, Prefix


def test_an_environment_to_export_or_check_is_named_by_its_absolute_path() -> None:
    assert FromPrefix(Path("env")).path == Prefix(Path("env")).path == Path.cwd() / "env"


def test_a_relative_prefix_in_a_removed_folder_is_said_not_there(tmp_path: Path) -> None:
    """`Path.absolute` fails once the working folder is gone: the path stays as given, so `check` says the
    environment is not a folder (exit 1) rather than failing on `getcwd` (exit 3)."""
    gone = tmp_path / "gone"
    gone.mkdir()
    lock = tmp_path / "lock.yml"
    lock.write_text("version: 1\n")
    script = (
        f"import os, sys; os.chdir({str(gone)!r}); os.rmdir({str(gone)!r}); sys.argv = ['lockgen', 'check', "
        f"'--lock', {str(lock)!r}, '--prefix', 'env']\nfrom lockgen.cli import main\nmain()"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"}
    )
    assert done.returncode == 1 and "error: env is not a folder" in done.stderr and "Traceback" not in done.stderr, (
        done.stderr
    )
