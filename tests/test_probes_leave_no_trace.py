"""Asking an environment's interpreter about itself writes nothing into that environment.

Found on the H200: the first `check --lock` of a venv left byte code behind (its `.pth` hooks imported modules
whose `__pycache__` was missing), so the tree the check had just proven moved under its kept verdict and the next
check fell back to per-file fingerprints (4.9 s instead of 1 s). Interpreters are asked with `-B`.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from lockgen.adapters.node import inventory_probe
from lockgen.adapters.pypi import python_dists


def venv_with_a_hook(root: Path) -> Path:
    """A venv whose site-packages holds a `.pth` that imports a module with no byte code yet."""
    prefix = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True, timeout=60)
    site = next((prefix / "lib").glob("python3*/site-packages"))
    (site / "hook_module.py").write_text("VALUE = 1\n")
    (site / "hook.pth").write_text("import hook_module\n")
    return prefix


def written_byte_code(prefix: Path) -> list[str]:
    return sorted(p.relative_to(prefix).as_posix() for p in prefix.rglob("*.pyc"))


def test_the_hook_writes_byte_code_when_python_is_run_plainly(tmp_path: Path) -> None:
    """The premise: without -B the same interpreter does write into its environment."""
    prefix = venv_with_a_hook(tmp_path)
    subprocess.run([str(prefix / "bin" / "python"), "-I", "-c", "pass"], check=True, timeout=60)
    assert any(
        path.endswith("hook_module.cpython-%d%d.pyc" % sys.version_info[:2]) for path in written_byte_code(prefix)
    )


def test_asking_for_the_prefix_and_the_inventory_writes_nothing(tmp_path: Path) -> None:
    prefix = venv_with_a_hook(tmp_path)
    python = prefix / "bin" / "python"
    assert python_dists.prefix_of(str(python)) == prefix
    inventory_probe.probe(python)
    assert written_byte_code(prefix) == []
