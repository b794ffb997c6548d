"""The command line builds only the command it is given (`lockgen.cli.command`): the help every way it is asked
for reads exactly as the whole app's does, a named command is the only one built, a word that names none gets
the whole app's error."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from lockgen.cli.app import command
from lockgen.adapters.proof.stat_walk import RACY_NS
from tests.channel_factory import PLACEHOLDER, Pkg, build_channel
from tests.conftest import run_cli

ASKED = [
    ["--help"],
    [],
    ["--help", "materialize"],
    ["-v", "--help"],
    ["cert", "--help"],
    ["fleet", "--help"],
    ["materialize", "--help"],
    ["run", "--help"],
    ["nosuch"],
    ["--bogus"],
    ["--version"],
]


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


# modules resolve has no use for on a conda stack: the conformance models (they render checks), the wheel file-name
# parser, PEP 440 versions and the INI reader (PyPI entries and entry points only)
NOT_FOR_RESOLVE = (
    "lockgen.model.conformance",
    "lockgen.core.pypi.wheel_names",
    "packaging.version",
    "configparser",
    "typer",  # the fast path runs resolve before typer (issue 43 item 4)
    "difflib",  # a misnamed --channel-alias's suggestion only
    "lockgen.model.results",  # every other command's results: resolve's are in model/resolved.py
)
# a repeated check --lock of a prefix whose kept verdict stands is a stat walk: no model library, no lock parser
NOT_FOR_A_KEPT_VERDICT = (
    "pydantic",
    "yaml",
    "lockgen.adapters.lock.lockfile_yaml",
    "lockgen.api.steps.manifest_steps",
    "lockgen.adapters.proof.bytecode_proof",
)
SHOW_LOADED = (
    "import atexit, os, runpy, sys\n"
    "watched = sys.argv.pop(1).split(',')\n"
    "def show():\n"
    "    print('loaded:', [m for m in watched if m in sys.modules], file=sys.stderr, flush=True)\n"
    "end = os._exit\n"  # the CLI ends by os._exit once rattler is loaded, atexit otherwise: either says it
    "os._exit = lambda code: (show(), end(code))\n"
    "atexit.register(show)\n"
    "sys.argv = ['lockgen', *sys.argv[1:]]\nrunpy.run_module('lockgen', run_name='__main__')\n"
)


def _loaded(watched: tuple[str, ...], *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """A lockgen command's exit status and which of the `watched` modules it loaded (its stderr's last line)."""
    done = subprocess.run(
        [sys.executable, "-c", SHOW_LOADED, ",".join(watched), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1", **(env or {})},
    )
    return done.returncode, done.stderr.strip().splitlines()[-1]


@pytest.mark.slow
def test_resolve_of_a_conda_stack_loads_only_what_it_uses(example_copy: Path, snapshot: Path, tmp_path: Path) -> None:
    """Each of these modules is imported where it is used, not at start-up: a resolve of the conda example loads
    none of them; a check --lock, which renders conformance, does load its models (the probe sees them)."""
    code, loaded = _loaded(
        NOT_FOR_RESOLVE, "resolve", str(example_copy), "--channel-alias", f"conda-forge={snapshot}", "--dry-run"
    )
    assert (code, loaded) == (0, "loaded: []")
    code, loaded = _loaded(
        NOT_FOR_RESOLVE, "check", "--lock", str(tmp_path / "none.yml"), "--prefix", str(tmp_path / "nowhere")
    )
    assert code == 1 and "lockgen.model.conformance" in loaded


@pytest.mark.slow
def test_a_repeated_check_of_a_prefix_loads_no_model_library(tmp_path: Path) -> None:
    """The second check of an unchanged environment is proven by its kept verdict: it imports neither pydantic
    nor the lock's parser (the first check, which does the work, loads both: the probe sees them)."""
    channel = build_channel(
        tmp_path / "channel",
        [
            Pkg(
                "libfoo",
                "1.0",
                files={"lib/libfoo.txt": "foo\n", "etc/libfoo/prefix.txt": f"installed at {PLACEHOLDER}\n"},
            )
        ],
    )
    stack = tmp_path / "stack" / "stack.toml"
    stack.parent.mkdir()
    stack.write_text(
        f'[stack]\nname = "tiny"\nchannels = ["{channel.as_uri()}"]\n[dependencies]\nlibfoo = '
        '"*"\n[targets.cpu]\narch = "cpu"\n'
    )
    home = {"LOCKGEN_HOME": str(tmp_path / "home")}
    assert run_cli("resolve", str(stack), env=home).returncode == 0
    lock, prefix = stack.parent / "locks" / "cpu.conda-lock.yml", tmp_path / "env"
    assert run_cli("materialize", str(lock), "--prefix", str(prefix), env=home).returncode == 0
    bundle = tmp_path / "manifests.json.gz"
    assert run_cli("manifests", str(lock), "--out", str(bundle), env=home).returncode == 0
    time.sleep(RACY_NS / 1e9 + 0.1)  # a tree changed within RACY_NS of a check keeps no verdict
    for offline in ([], ["--manifests", str(bundle)]):  # a verdict reached with a bundle is bound to its bytes
        first = _loaded(
            NOT_FOR_A_KEPT_VERDICT, "check", "--lock", str(lock), "--prefix", str(prefix), *offline, env=home
        )
        assert first[0] == 0 and "pydantic" in first[1] and "yaml" in first[1]
        assert _loaded(
            NOT_FOR_A_KEPT_VERDICT, "check", "--lock", str(lock), "--prefix", str(prefix), *offline, env=home
        ) == (0, "loaded: []")
