"""Fresh before run (issue 44 item 1): `run`, `shell` and `activate` given a STACK check its target's lock against
what the stack says (`resolve --check`'s rule on the digests the lock keeps), re-lock a stale one and say so;
`--locked` refuses it (error, hint, exit 1, the lock untouched), `--frozen` uses it as it is."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from lockgen.api import resolve as api
from tests.channel_factory import Pkg, build_channel
from tests.conftest import run_cli

REPO = Path(__file__).resolve().parent.parent
LISTED = 'ls "$CONDA_PREFIX/share"'


def _env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "user").mkdir(exist_ok=True)
    return {"LOCKGEN_HOME": str(tmp_path / "home"), "HOME": str(tmp_path / "user")}


@pytest.mark.slow
def test_a_stack_changed_since_its_lock_is_relocked_refused_or_used_as_it_is(tmp_path: Path) -> None:
    channel = build_channel(
        tmp_path / "channel", [Pkg(name, "1.0", files={f"share/{name}/a.txt": name}) for name in ("alpha", "beta")]
    )
    stack = tmp_path / "stack" / "stack.toml"
    stack.parent.mkdir()
    stack.write_text(
        f'[stack]\nname = "fresh"\nchannels = ["{channel.as_uri()}"]\n[dependencies]\nalpha = '
        '"*"\n[targets.cpu]\narch = "cpu"\n'
    )
    api.resolve(stack)
    lock = stack.parent / "locks" / "cpu.conda-lock.yml"
    env = _env(tmp_path)
    fresh = run_cli("run", str(stack), "--target", "cpu", "--locked", "--", "sh", "-c", LISTED, env=env)
    assert (fresh.returncode, fresh.stdout) == (0, "alpha\n") and "stale" not in fresh.stderr
    stack.write_text(stack.read_text().replace('alpha = "*"', 'alpha = "*"\nbeta = "*"'))
    before = lock.read_bytes()

    refused = run_cli("run", str(stack), "--target", "cpu", "--locked", "--", "sh", "-c", LISTED, env=env)
    assert refused.returncode == 1 and refused.stdout == "" and lock.read_bytes() == before
    error, hint = refused.stderr.strip().splitlines()[-2:]
    assert error.startswith(
        "error: the lock of target `cpu` is stale: dependencies or channels changed (beta added: *)"
    )
    assert hint.startswith(f"hint: lockgen resolve {stack} --target cpu")
    said = run_cli("activate", str(stack), "--target", "cpu", "--locked", env=env)
    assert said.returncode == 1 and said.stdout == "" and "is stale" in said.stderr

    frozen = run_cli("run", str(stack), "--target", "cpu", "--frozen", "--", "sh", "-c", LISTED, env=env)
    assert (frozen.returncode, frozen.stdout) == (0, "alpha\n") and lock.read_bytes() == before

    relocked = run_cli("run", str(stack), "--target", "cpu", "--", "sh", "-c", LISTED, env=env)
    assert (relocked.returncode, relocked.stdout) == (0, "alpha\nbeta\n"), relocked.stderr
    assert (
        f"{lock} is stale (dependencies or channels changed (beta added: *)): re-locking target cpu" in relocked.stderr
    )
    assert lock.read_bytes() != before and run_cli("resolve", str(stack), "--check", env=env).returncode == 0
    again = run_cli("run", str(stack), "--target", "cpu", "--locked", "--", "sh", "-c", LISTED, env=env)
    assert (again.returncode, again.stdout) == (0, "alpha\nbeta\n") and "stale" not in again.stderr

    both = run_cli("shell", str(stack), "--locked", "--frozen", env=env)
    assert both.returncode == 2 and "--locked and --frozen cannot be given together" in both.stderr


@pytest.mark.slow
@pytest.mark.network
def test_a_dependency_added_to_the_quickstart_is_locked_before_run(tmp_path: Path) -> None:
    """The issue's case: `packaging` added to the quickstart stack; `run` re-locks and the import works."""
    folder = tmp_path / "quickstart"
    shutil.copytree(REPO / "envs" / "examples" / "quickstart", folder)
    stack = folder / "stack.toml"
    stack.write_text(stack.read_text().replace('rich = "*"', 'rich = "*"\npackaging = "*"'))
    lock = folder / "locks" / "cpu.conda-lock.yml"
    before = lock.read_bytes()
    env = _env(tmp_path)
    probe = "import importlib.util; print(importlib.util.find_spec('packaging') is not None)"

    refused = run_cli("run", str(folder), "--target", "cpu", "--locked", "--", "python", "-c", probe, env=env)
    assert (
        refused.returncode == 1
        and "stale: dependencies or channels changed (pypi packaging added: *)" in refused.stderr
    )
    assert lock.read_bytes() == before

    frozen = run_cli("run", str(folder), "--target", "cpu", "--frozen", "--", "python", "-c", probe, env=env)
    assert (frozen.returncode, frozen.stdout) == (0, "False\n"), frozen.stderr

    relocked = run_cli(
        "run", str(folder), "--target", "cpu", "--", "python", "-c", "import packaging, rich; print('ok')", env=env
    )
    assert (relocked.returncode, relocked.stdout) == (0, "ok\n"), relocked.stderr
    assert "re-locking target cpu" in relocked.stderr and b"name: packaging" in lock.read_bytes()
