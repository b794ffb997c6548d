"""The smaller things of the daily loop (issue 44 item 6): `lockgen run LOCK python -V` without `--`, `explain`
taking this node's target as `detect` chooses it, `resolve` and `explain` taking ./stack.toml as `run` does, a
wrong sha256 in a lock said as a hash mismatch (not "check the network"), and YAML errors naming their line."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lockgen.adapters.lock.lockfile_yaml import parse_lock
from lockgen.api.resolve import resolve
from lockgen.cli.app import command
from lockgen.cli.run_cmds import COMMAND
from lockgen.errors import LockFormatError
from tests.conftest import REPO, run_cli, unsealed
from tests.wheel_index import Wheel, served_index

QUICKSTART = REPO / "envs" / "examples" / "quickstart"
LOCKS = sorted((REPO / "envs" / "examples").glob("*/locks/*.conda-lock.yml"))


def parsed_run(args: list[str]) -> tuple[dict[str, object], list[str]]:
    """(the options and LOCK|STACK `lockgen run ARGS` parses, the command it runs), as the app parses them."""
    app = command(["run", *args])
    run = app.commands["run"]  # type: ignore[attr-defined]
    context = run.make_context("run", list(args))
    return context.params, context.meta.get(COMMAND, [])


@pytest.mark.parametrize(
    ("args", "source", "target", "ran"),
    [
        (["LOCK.conda-lock.yml", "python", "-V"], "LOCK.conda-lock.yml", None, ["python", "-V"]),
        (["LOCK.conda-lock.yml", "--", "python", "-V"], "LOCK.conda-lock.yml", None, ["python", "-V"]),
        (["python", "-V"], None, None, ["python", "-V"]),  # ./stack.toml's environment, as `uv run python -V`
        (
            ["-t", "cpu", "stack.toml", "python", "-c", "x", "--", "--target"],
            "stack.toml",
            "cpu",
            ["python", "-c", "x", "--", "--target"],
        ),
        (["--target", "cpu", "--platform", "linux-64", "pytest", "-x"], None, "cpu", ["pytest", "-x"]),
        (["stack.toml", "--", "--weird-program"], "stack.toml", None, ["--weird-program"]),
    ],
)
def test_run_takes_its_command_with_or_without_a_double_dash(
    args: list[str], source: str | None, target: str | None, ran: list[str]
) -> None:
    params, command_line = parsed_run(args)
    assert (str(params["source"]) if params["source"] else None, params["target"], command_line) == (
        source,
        target,
        ran,
    )


def test_run_without_a_double_dash_runs_the_command(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    result = run_cli("run", "--prefix", str(venv), "python", "-c", "import sys; print(sys.prefix)")
    assert result.returncode == 0 and result.stdout == f"{venv}\n", result.stderr


def node_facts(tmp_path: Path, glibc: str) -> dict[str, str]:
    path = tmp_path / "node.json"
    path.write_text(json.dumps({"platform": "linux-64", "glibc": glibc, "driver": None, "gpus": []}))
    return {"LOCKGEN_NODE_FACTS": str(path)}


@pytest.mark.slow
@pytest.mark.parametrize(("glibc", "chosen"), [("2.35", "cpu"), ("2.17", "cpu-el7")])
def test_explain_takes_this_nodes_target_and_the_stack_here(tmp_path: Path, glibc: str, chosen: str) -> None:
    folder = tmp_path / "quickstart"
    shutil.copytree(QUICKSTART, folder)
    for where, args in ((folder, []), (tmp_path, [str(folder)])):  # ./stack.toml, or a stack's folder
        result = run_cli("explain", *args, cwd=where, env=node_facts(tmp_path, glibc))
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith(f"target {chosen}: cpu, driver none\n")


def test_explain_on_a_node_no_target_matches_names_the_way_out(tmp_path: Path) -> None:
    result = run_cli("explain", str(QUICKSTART), env=node_facts(tmp_path, "2.12"))
    assert result.returncode == 1 and "no target of" in result.stderr and "pass --target NAME" in result.stderr, (
        result.stderr
    )


@pytest.mark.slow
def test_resolve_takes_the_stack_here(tmp_path: Path) -> None:
    folder = tmp_path / "quickstart"
    shutil.copytree(QUICKSTART, folder)
    here = run_cli("resolve", "--check", cwd=folder)
    assert here.returncode == 0 and "all locks are fresh" in here.stderr, here.stderr
    assert run_cli("resolve", str(folder), "--check").returncode == 0
    (folder / "stack.toml").write_text((folder / "stack.toml").read_text().replace('rich = "*"', 'rich = ">=13"'))
    stale = run_cli("resolve", "--check", cwd=folder)
    assert stale.returncode == 1 and "spec-changed" in stale.stdout, stale.stdout
    nothing = run_cli("resolve", "--check", cwd=tmp_path)
    assert nothing.returncode == 1 and "error: stack file `stack.toml` does not exist" in nothing.stderr


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(LOCKS), st.integers(min_value=1, max_value=400))
def test_a_yaml_error_names_its_line(lock: Path, line: int) -> None:
    """A line of a lock indented with a tab (a hand edit): the error names that line and column."""
    lines = lock.read_text().splitlines(keepends=True)
    line = line % (len(lines) - 1) + 1  # any line but the first
    lines[line] = "\t" + lines[line]
    with pytest.raises(LockFormatError) as refused:
        parse_lock("".join(lines), "x.conda-lock.yml")
    assert re.match(
        rf"lock `x\.conda-lock\.yml` is not valid YAML at line {line + 1}, column \d+: \S", refused.value.message
    ), refused.value.message


def test_an_import_of_broken_yaml_names_its_line(tmp_path: Path) -> None:
    broken = tmp_path / "env.yml"
    broken.write_text("name: x\ndependencies:\n  - numpy\n  - [unclosed\n")
    result = run_cli("import", str(broken), "--target", "cpu", "--out", str(tmp_path / "out.yml"))
    assert result.returncode == 1 and "nor valid YAML at line 5, column 1: " in result.stderr, result.stderr


@pytest.mark.slow
def test_a_wrong_sha256_reads_as_a_hash_mismatch(tmp_path: Path) -> None:
    with served_index(tmp_path / "index", [Wheel("alpha", "1.0")]) as url:
        (tmp_path / "stack.toml").write_text(
            '[stack]\nname = "x"\npython = "3.11"\n[pypi-dependencies]\nalpha = "*"\n[pypi-options]\nindex-url '
            f'= "{url}"\n[targets.cpu]\narch = "cpu"\n'
        )
        resolve(tmp_path / "stack.toml")
        lock = tmp_path / "locks" / "cpu.conda-lock.yml"
        real = re.search(r"sha256: ([0-9a-f]{64})", lock.read_text())[1]  # type: ignore[index]
        lock.write_text(
            unsealed(lock.read_text().replace(real, "ab" * 32))
        )  # past the package-set record: the fetch's own check
        result = run_cli("materialize", str(lock), "--prefix", str(tmp_path / "env"))
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    error, hint = result.stderr.strip().splitlines()[-2:]
    assert (
        error == f"error: `alpha`'s wheel at {url.removesuffix('/simple')}/files/alpha-1.0-py3-none-any.whl has sha256 "
        f"{real}, and the lock says {'ab' * 32}: nothing was installed"
    ), result.stderr
    assert (
        hint.startswith("hint: the lock's hash or the index's file changed since the lock was made")
        and "network" not in hint
    )
    assert not (tmp_path / "env").exists()
