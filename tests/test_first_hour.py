"""The first hour without surprises: what lockgen says about a file it was given by mistake, a number where a
version goes, `-v` after the command, a kernel hint that runs from any folder, and help that reads as a
command line (STACK, LOCK, PKG), for every command."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lockgen.cli.app import VERBOSE, command, verbose_first
from lockgen.core.stack.spec_parse import parse_stack_text
from lockgen.errors import SpecError
from tests.conftest import REPO, run_cli

QUICKSTART = REPO / "envs" / "examples" / "quickstart" / "stack.toml"


def test_a_stack_given_for_a_lock_is_named_a_stack(tmp_path: Path) -> None:
    """`lockgen materialize stack.toml`: not "not valid YAML ... re-create it", but what to pass instead."""
    for args in (
        ["materialize", str(QUICKSTART), "--prefix", str(tmp_path / "env")],
        ["diff", str(QUICKSTART), str(QUICKSTART)],
    ):
        result = run_cli(*args)
        assert result.returncode in (1, 2) and "Traceback" not in result.stderr
        error, hint = result.stderr.strip().splitlines()[-2:]
        assert error == f"error: `{QUICKSTART}` is a stack (stack.toml), not a lock", result.stderr
        assert hint.startswith(f"hint: resolve it first: lockgen resolve {QUICKSTART}, then pass a target's lock")
        assert str(QUICKSTART.parent / "locks" / "cpu.conda-lock.yml") in hint and "YAML" not in result.stderr
    assert not (tmp_path / "env").exists()


@settings(max_examples=60, deadline=None)
@given(
    st.one_of(st.integers(min_value=0, max_value=99), st.decimals(min_value=0, max_value=99, places=2).map(str)),
    st.sampled_from(["", "  # the interpreter", "\t"]),
)
def test_a_version_written_as_a_number_says_to_quote_it_as_written(number: object, comment: str) -> None:
    """`python = 3.10` is the float 3.1 to TOML: the hint quotes what the file says, not what TOML read."""
    written = str(number)
    text = (
        f'[stack]\nname = "s"\npython = {written}{comment}\n[pypi-dependencies]\nsix = "*"\n[targets.cpu]\narch = '
        '"cpu"\n'
    )
    with pytest.raises(SpecError) as raised:
        parse_stack_text(text, "stack.toml")
    assert raised.value.message.startswith(f"stack.toml:3: `python` in stack: {written} is a number here")
    assert raised.value.hint == f'write it in quotes: python = "{written}"'


def test_the_update_hint_names_the_table_the_stack_uses(tmp_path: Path) -> None:
    stack = tmp_path / "stack.toml"
    stack.write_text(QUICKSTART.read_text())
    (tmp_path / "locks").mkdir()
    for lock in (QUICKSTART.parent / "locks").iterdir():
        (tmp_path / "locks" / lock.name).write_bytes(lock.read_bytes())
    result = run_cli("resolve", str(stack), "--update", "no-such-package")
    assert (
        result.returncode == 1
        and "hint: --update takes names of locked packages; add new ones to [pypi-dependencies]" in result.stderr
    ), result.stderr


@pytest.mark.parametrize("where", ["before", "after", "between"])
def test_verbose_anywhere_on_the_line(tmp_path: Path, where: str) -> None:
    missing = str(tmp_path / "missing.conda-lock.yml")
    args = {
        "before": ["-v", "diff", missing, missing],
        "after": ["diff", missing, missing, "--verbose"],
        "between": ["diff", missing, "-v", missing],
    }[where]
    result = run_cli(*args)
    assert result.returncode == 2 and "Traceback" in result.stderr and "error: lock" in result.stderr
    assert "Traceback" not in run_cli("diff", missing, missing).stderr


@given(st.lists(st.sampled_from(["-v", "--verbose", "diff", "a", "b", "--json", "--", "-x"]), max_size=10))
def test_verbose_first_moves_only_the_flag(args: list[str]) -> None:
    moved = verbose_first(args)
    end = args.index("--") if "--" in args else len(args)
    tail = len(args) - end
    assert moved[len(moved) - tail :] == args[end:]  # another program's words stay as they are
    head = moved[: len(moved) - tail]
    asked = any(a in VERBOSE for a in args[:end])
    assert [a for a in head if a in VERBOSE] == ([head[0]] if asked else [])  # once, first, when asked for
    assert [a for a in head if a not in VERBOSE] == [a for a in args[:end] if a not in VERBOSE]


def test_the_kernel_hint_runs_from_any_folder(tmp_path: Path) -> None:
    """The hint of a kernel that failed (no torch in the environment) is a command line that finds the kernel
    from any folder, which `python -m verify` alone does not in an environment lockgen is not installed in."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    result = run_cli("verify", "--arch", "cpu", "--quick", "--python", python, "--out", str(tmp_path / "x.cert.json"))
    assert result.returncode == 1 and "No module named 'torch'" in result.stderr, result.stderr
    hint = next(line for line in result.stderr.splitlines() if line.startswith("hint: "))
    by_hand = hint.split("run the kernel by hand: ", 1)[1]
    assert by_hand.endswith(f"{shlex.quote(python)} -m verify --arch cpu --quick")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    plain = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # as a user's shell has it
    helped = subprocess.run(
        by_hand.replace("--arch cpu --quick", "--help"),
        shell=True,
        capture_output=True,
        text=True,
        cwd=elsewhere,
        env=plain,
    )
    assert helped.returncode == 0 and "usage: python -m verify" in helped.stdout, helped.stderr
    bare = subprocess.run([python, "-m", "verify", "--help"], capture_output=True, text=True, cwd=elsewhere, env=plain)
    assert bare.returncode != 0 and "No module named verify" in bare.stderr


def _commands(group: object, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = []
    for name, sub in sorted(getattr(group, "commands", {}).items()):
        found += _commands(sub, (*path, name)) if getattr(sub, "commands", None) else [(*path, name)]
    return found


def test_every_commands_help_reads_as_a_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    """No `{stack}`, `lock <path>` or `--update <list[str]>` (typer's own), in any command's help."""
    app = command()
    commands = _commands(app)
    assert len(commands) >= 25 and ("cert", "verify") in commands
    for path in commands:
        with pytest.raises(SystemExit) as ended:
            app.main([*path, "--help"], prog_name="lockgen")  # type: ignore[attr-defined]
        shown = capsys.readouterr().out
        assert ended.value.code == 0, (path, shown)
        usage = shown.split("\n\n", 1)[0]
        assert not re.search(r"\{\w+\}|\[[a-z_]+\]", usage), (path, usage)
        assert not re.search(r"<(list\[|str>|path>|int>|float>)", shown), (path, shown)
    real = run_cli("resolve", "--help")
    assert "resolve [OPTIONS] [STACK]" in real.stdout and "--update PKG" in real.stdout
    missing = run_cli("resolve", cwd=REPO / "docs")  # STACK is ./stack.toml, as for run (issue 44)
    assert missing.returncode == 1 and "error: stack file `stack.toml` does not exist" in missing.stderr
