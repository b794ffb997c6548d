"""The command line builds only the command it is given (`lockgen.cli.command`): the help every way it is asked
for reads exactly as the whole app's does, a named command is the only one built, a word that names none gets
the whole app's error."""

from __future__ import annotations

from typing import Any

import pytest

from lockgen.cli import command
from tests.conftest import run_cli

ASKED = [["--help"], [], ["--help", "materialize"], ["-v", "--help"], ["cert", "--help"], ["fleet", "--help"],
         ["materialize", "--help"], ["run", "--help"], ["nosuch"], ["--bogus"], ["--version"]]


def _said(built: Any, args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[object, str, str]:
    try:
        built.main(args=args, prog_name="lockgen")
        code: object = 0
    except SystemExit as exit_:
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("args", ASKED)
def test_help_and_errors_read_as_the_whole_apps(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert _said(command(args), args, capsys) == _said(command(None), args, capsys)


def test_a_named_command_is_the_only_one_built() -> None:
    built: Any = command(["-v", "materialize", "--prefix", "x", "lock.yml"])
    assert list(built.commands) == ["materialize"] and built.commands["materialize"].params
    listing: Any = command(["--help"])
    whole: Any = command(None)
    assert list(listing.commands) == list(whole.commands)
    assert not listing.commands["materialize"].params and listing.commands["fleet"].commands


def test_the_real_entry_point_lists_every_command() -> None:
    done = run_cli("--help")
    assert done.returncode == 0 and all(f"  {name}" in done.stdout for name in ("resolve", "materialize", "fleet"))
