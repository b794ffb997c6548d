"""The activation's rules (`core.env.activation`): the variables of a conda environment and a venv, what a calling
environment's active environment loses, and the exports `activate` prints, evaluated by real bash, zsh and fish
for values of every kind (hypothesis): each variable comes back byte for byte, each unset one is gone."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import PurePosixPath

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lockgen.core.env.activation import Changes, activated, changes, exports, prompt_name, sourced
from lockgen.core.env.activation_vars import bin_folder

PREFIX = PurePosixPath("/store/envs/abc-cpu-linux-64")


def test_a_conda_environment_and_a_venv() -> None:
    calling = {
        "PATH": "/old/venv/bin:/usr/bin:/store/envs/abc-cpu-linux-64/bin:/bin",
        "VIRTUAL_ENV": "/old/venv",
        "VIRTUAL_ENV_PROMPT": "old",
        "PYTHONHOME": "/x",
        "HOME": "/home/u",
    }
    conda = activated("conda", PREFIX, "cpu", calling)
    assert conda["PATH"] == f"{PREFIX}/bin:/usr/bin:/bin"  # first once; the venv active before taken out
    assert (conda["CONDA_PREFIX"], conda["CONDA_DEFAULT_ENV"], conda["CONDA_SHLVL"]) == (str(PREFIX),) * 2 + ("1",)
    assert "VIRTUAL_ENV" not in conda and "VIRTUAL_ENV_PROMPT" not in conda and "PYTHONHOME" not in conda
    assert conda["HOME"] == "/home/u" and conda["LOCKGEN_ENV_NAME"] == "cpu"
    venv = activated(
        "venv", PREFIX, "cpu", {"PATH": "/conda/bin:/usr/bin", "CONDA_PREFIX": "/conda", "CONDA_DEFAULT_ENV": "base"}
    )
    assert venv["PATH"] == f"{PREFIX}/bin:/usr/bin" and venv["VIRTUAL_ENV"] == str(PREFIX)
    assert "CONDA_PREFIX" not in venv and "CONDA_DEFAULT_ENV" not in venv
    assert activated("venv", PREFIX, "cpu", {})["PATH"] == f"{PREFIX}/bin:/usr/local/bin:/usr/bin:/bin"


def test_what_the_scripts_exported_and_what_bash_keeps() -> None:
    before = {"PATH": "/p/bin", "SHLVL": "2", "GONE": "1"}
    after = {"PATH": "/p/bin", "SHLVL": "3", "PWD": "/somewhere", "_": "/usr/bin/python", "CUDA_HOME": "/p"}
    assert sourced(before, after) == {"PATH": "/p/bin", "SHLVL": "2", "CUDA_HOME": "/p"}
    assert changes(before, sourced(before, after)) == Changes((("CUDA_HOME", "/p"),), ("GONE",))
    assert changes({"a.b": "1"}, {"c-d": "2"}) == Changes((), ())  # names no shell can set or unset


def test_prompt_names_are_inert() -> None:
    assert prompt_name("h100") == "h100"
    assert prompt_name("$(rm -rf ~)`x`\n") == "__rm_-rf____x__"
    assert prompt_name("") == "env"


@pytest.fixture(scope="module")
def shell_folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A runtime and temporary folder of the test's own for the shells (fish otherwise keeps its runtime files in
    a /tmp/fish.USER it leaves)."""
    folders = {"XDG_RUNTIME_DIR": tmp_path_factory.mktemp("run"), "TMPDIR": tmp_path_factory.mktemp("tmp")}
    for folder in folders.values():
        folder.chmod(0o700)
    return {name: str(folder) for name, folder in folders.items()}


NAMES = st.from_regex(r"\ALGT_[A-Z0-9_]{1,8}\Z")
VALUES = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(values=st.dictionaries(NAMES, VALUES, min_size=1, max_size=6), gone=st.lists(NAMES, max_size=3))
def test_exports_evaluated_by_real_shells_give_back_every_value(
    shell_folders: dict[str, str], values: dict[str, str], gone: list[str]
) -> None:
    unset = tuple(sorted(set(gone) - set(values)))
    change = Changes(tuple(sorted(values.items())), unset)
    calling = {**os.environ, **shell_folders, **{name: "before" for name in unset}, "LC_ALL": "C.UTF-8"}
    dump = "import json, os; print(json.dumps({k: v for k, v in os.environ.items() if k.startswith('LGT_')}))"
    for shell in ("bash", "zsh", "fish"):
        source = "printf %s $argv[1] | source" if shell == "fish" else 'eval "$1"'
        script = f'{source}; python3 -c "{dump}"'
        args = [shell, "-c", script] + (["x"] if shell != "fish" else []) + [exports(change, shell)]
        done = subprocess.run(args, capture_output=True, text=True, env=calling)
        assert done.returncode == 0, (shell, done.stderr)
        assert json.loads(done.stdout) == values, shell


@given(st.text(alphabet="/.ab\\x", max_size=12))
def test_a_bin_folder_is_named_as_pathlib_names_it(folder: str) -> None:
    """`activation_vars.bin_folder` (no pathlib: the kept `run`'s path) names what `PurePosixPath(f) / "bin"` names."""
    assert bin_folder(folder) == str(PurePosixPath(folder) / "bin")


@given(st.text(max_size=80))
def test_a_prompt_name_keeps_letters_digits_dots_dashes_and_underscores(name: str) -> None:
    """The prompt name without `re` (the kept `run`'s path) is the rule it was: `[^A-Za-z0-9._-]` becomes `_`."""
    assert prompt_name(name) == (re.sub(r"[^A-Za-z0-9._-]", "_", name)[:64] or "env")
