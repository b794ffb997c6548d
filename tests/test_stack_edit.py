"""`lockgen add` and `lockgen remove`: the stack edited with every other byte kept (tomlkit round trips against
the original bytes), re-locked by resolve's own step against the tests' local channel and wheel index, the
locks' changes shown, and a change that does not parse or solve leaving the stack and its locks as they were."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lockgen.adapters.lock.lockfile_yaml import load_lock
from lockgen.api.resolve import resolve
from lockgen.core.stack.spec_parse import parse_stack_text
from lockgen.core.stack.stack_edit import addition, default_table, with_added, without
from lockgen.errors import UserError
from tests.conftest import REPO, run_cli
from tests.wheel_index import Wheel, served_index

EXAMPLES = sorted((REPO / "envs" / "examples").glob("*/stack.toml"))
CONDA_STACK = (
    '# a tiny stack\n[stack]\nname = "tiny"   # its name\nchannels = ["{channel}"]\n\n[dependencies]\npytorch = "*"  '
    '# the CPU build\n\n# the fleet\n[targets.cpu]\narch = "cpu"\n'
)


def added_lines(old: str, new: str) -> list[str]:
    """The lines of `new` that are not `old`'s, once every line of `old` is found in `new`, in order, byte for byte."""
    rest, extra = new.splitlines(keepends=True), []
    for line in old.splitlines(keepends=True):
        while rest and rest[0] != line:
            extra.append(rest.pop(0))
        assert rest, f"{line!r} of the original is gone"
        rest.pop(0)
    return extra + rest


@pytest.mark.parametrize("stack", EXAMPLES, ids=lambda p: p.parent.name)
def test_adding_then_removing_gives_back_the_original_bytes(stack: Path) -> None:
    text = stack.read_text()
    table = default_table(text)
    added = with_added(text, [addition("zlib-ng>=2.0", table)], str(stack))
    assert added_lines(text, added) == ['zlib-ng = ">=2.0"\n']
    assert without(added, ["zlib-ng"], str(stack)) == text


names = st.from_regex(r"[a-z][a-z0-9]{0,8}(-[a-z0-9]{1,4})?", fullmatch=True)
comments = st.sampled_from(["", "  # pinned", "\t# why"])


@settings(max_examples=40, deadline=None)
@given(
    st.lists(names, min_size=1, max_size=5, unique=True),
    comments,
    st.sampled_from(["\n", "\n\n", "\n\n# the fleet\n"]),
    names,
    st.sampled_from(["", ">=1.2", "==2.0.*", "~=3.1"]),
)
def test_an_addition_is_one_line_at_the_end_of_its_table(
    present: list[str], comment: str, gap: str, new: str, spec: str
) -> None:
    """Whatever the table's comments and the blank lines and comments before the next table, the new line
    lands right after the table's last key, and taking it out gives back the original bytes."""
    lines = "".join(f'{name} = ">=1"{comment}\n' for name in present)
    text = f'[stack]\nname = "s"\npython = "3.11"\n\n[pypi-dependencies]\n{lines}{gap}[targets.cpu]\narch = "cpu"\n'
    if new in present:
        with pytest.raises(UserError, match="already"):
            with_added(text, [addition(new + spec, "pypi-dependencies")], "stack.toml")
        return
    added = with_added(text, [addition(new + spec, "pypi-dependencies")], "stack.toml")
    assert added == text.replace(lines, f'{lines}{new} = "{spec or "*"}"\n', 1)
    assert without(added, [new], "stack.toml") == text


versions = st.from_regex(r"[0-9]{1,3}(\.[0-9]{1,3}){0,2}", fullmatch=True)
pypi_specs = st.one_of(st.just(""), st.tuples(st.sampled_from(["==", ">=", "<", "~=", "!="]), versions).map("".join))
conda_specs = st.one_of(
    st.just(""),
    st.tuples(
        st.sampled_from(["", "=", ">=", "<", "==", " "]), versions, st.sampled_from(["", ".*", " cuda*", " *_cpu"])
    ).map("".join),
)


@settings(max_examples=30, deadline=None)
@given(
    names,
    pypi_specs,
    st.lists(st.sampled_from(["torch", "jupyter", "dev"]), max_size=2, unique=True),
    names,
    conda_specs,
)
def test_what_add_writes_is_what_the_stack_parser_reads(
    pypi_name: str, specifier: str, extras: list[str], conda_name: str, match_spec: str
) -> None:
    """A package as the command line writes it, put in a stack, reads back from the stack as that package (a bare
    conda version is written apart from the name, `numpy 1.26`: `numpy1.26` is a name)."""
    extra = f"[{','.join(extras)}]" if extras else ""
    conda_name = conda_name if conda_name != pypi_name else conda_name + "-c"
    text = with_added(
        CONDA_STACK.format(channel="file:///c"),
        [
            addition(f"{pypi_name}{extra}{specifier}", "pypi-dependencies"),
            addition(f"{conda_name}{' ' if match_spec[:1].isdigit() else ''}{match_spec}", "dependencies"),
        ],
        "stack.toml",
    )
    spec = parse_stack_text(text, "stack.toml")
    assert [(d.name, d.specifier, d.extras) for d in spec.pypi_dependencies] == [(pypi_name, specifier, tuple(extras))]
    assert spec.dependencies[-1].name == conda_name and spec.dependencies[-1].spec == match_spec.strip()


def test_a_table_the_stack_lacks_is_added_at_its_end() -> None:
    text = CONDA_STACK.format(channel="file:///c")
    added = with_added(text, [addition("rich[jupyter]>=13", "pypi-dependencies")], "stack.toml")
    assert added == text + '\n[pypi-dependencies]\nrich = {version = ">=13", extras = ["jupyter"]}\n'
    assert default_table(text) == "dependencies" and default_table(added) == "dependencies"
    assert default_table('[stack]\nname = "s"\n[pypi-dependencies]\nrich = "*"\n') == "pypi-dependencies"


@pytest.mark.parametrize(
    ("word", "table", "said"),
    [
        ("numpy>>1", "pypi-dependencies", "`numpy>>1` does not parse: `>>1` is not a PEP 440 version specifier"),
        ("numpy; python_version<'3.12'", "pypi-dependencies", "does not parse"),
        ("-numpy", "pypi-dependencies", "`-numpy` is not a PyPI requirement"),
        ('numpy "1"', "dependencies", "holds a character a stack's spec may not"),
        ("numpy 1\n2", "dependencies", "control character"),
    ],
)
def test_a_package_that_does_not_parse_is_refused(word: str, table: str, said: str) -> None:
    with pytest.raises(UserError) as refused:
        addition(word, table)  # type: ignore[arg-type]
    assert said in refused.value.message and refused.value.hint.startswith("write a ")


def test_a_package_present_or_absent_is_refused_naming_it() -> None:
    text = CONDA_STACK.format(channel="file:///c")
    with pytest.raises(UserError) as present:
        with_added(text, [addition("PyTorch>=2", "dependencies")], "stack.toml")
    assert present.value.message == "`pytorch` is in [dependencies] of stack.toml already"
    assert "lockgen remove pytorch" in present.value.hint
    with pytest.raises(UserError) as absent:
        without(text, ["pytorh"], "stack.toml")
    assert (
        absent.value.message == "`pytorh` is not in [dependencies] or [pypi-dependencies] of stack.toml"
        and absent.value.hint == "did you mean `pytorch`?"
    )


@pytest.fixture
def conda_stack(tmp_path: Path, gpu_channel: Path) -> Path:
    folder = tmp_path / "stack"
    folder.mkdir()
    stack = folder / "stack.toml"
    stack.write_text(CONDA_STACK.format(channel=gpu_channel.as_uri()))
    resolve(stack)
    return stack


@pytest.mark.slow
def test_add_then_remove_relocks_as_resolve_does(conda_stack: Path) -> None:
    """`add` puts one line in, re-locks and prints the lock's change; the stack is fresh after; `remove` gives
    back the stack's and the lock's original bytes."""
    original, lock = conda_stack.read_bytes(), conda_stack.parent / "locks" / "cpu.conda-lock.yml"
    original_lock = lock.read_bytes()
    added = run_cli("add", "plain-lib>=1.0", cwd=conda_stack.parent)
    assert added.returncode == 0, added.stderr
    assert added.stdout == "cpu:\n  + linux-64 plain-lib 1.0 h0_0\n"
    assert 'stack.toml: + plain-lib = ">=1.0"' in added.stderr
    assert added_lines(original.decode(), conda_stack.read_text()) == ['plain-lib = ">=1.0"\n']
    assert {p.name for p in load_lock(lock).package} == {"pytorch", "plain-lib"}
    assert run_cli("resolve", str(conda_stack), "--check").returncode == 0
    removed = run_cli("remove", "plain-lib", "--stack", str(conda_stack))
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout == "cpu:\n  - linux-64 plain-lib 1.0 h0_0\n"
    assert conda_stack.read_bytes() == original and lock.read_bytes() == original_lock


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["add", "no-such-package"], "error: target `cpu` on linux-64 is unsatisfiable"),
        (["add", "numpy >>1"], "error: `numpy >>1` is not a conda match spec"),
        (["add", "pytorch"], "error: `pytorch` is in [dependencies] of"),
        (["remove", "plain-lib"], "error: `plain-lib` is not in [dependencies] or [pypi-dependencies] of"),
        (["add", "--pypi", "rich"], "error: [pypi-dependencies] need a Python"),
        (["add", "plain-lib", "--target", "gpu"], "error: no target `gpu` in stack `tiny`"),
        (["remove", "pytorch"], "error: removing `pytorch` leaves"),
    ],
)
@pytest.mark.slow
def test_a_refused_change_leaves_the_stack_and_its_lock(conda_stack: Path, args: list[str], said: str) -> None:
    lock = conda_stack.parent / "locks" / "cpu.conda-lock.yml"
    before = conda_stack.read_bytes(), lock.read_bytes()
    result = run_cli(*args, "--stack", str(conda_stack))
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    error, hint = result.stderr.strip().splitlines()[-2:]
    assert error.startswith(said) and hint.startswith("hint: "), result.stderr
    assert (conda_stack.read_bytes(), lock.read_bytes()) == before


@pytest.mark.slow
def test_pypi_and_conda_together_are_a_usage_error(conda_stack: Path) -> None:
    result = run_cli("add", "rich", "--pypi", "--conda", "--stack", str(conda_stack))
    assert result.returncode == 2 and "error: --pypi and --conda each name the table" in result.stderr


@pytest.fixture
def index_url(tmp_path: Path) -> Iterator[str]:
    with served_index(
        tmp_path / "index", [Wheel("alpha", "1.0"), Wheel("gamma", "1.0", requires=("alpha",)), Wheel("delta", "1.0")]
    ) as url:
        yield url


@pytest.mark.slow
def test_add_to_a_pure_pypi_stack_with_two_targets(tmp_path: Path, index_url: str) -> None:
    """uv re-locks both targets; `--target` re-locks one and says the other's lock is stale."""
    stack = tmp_path / "stack.toml"
    stack.write_text(
        '[stack]\nname = "p"\npython = "3.11"\n\n[pypi-dependencies]\ndelta = "*"\n\n[pypi-options]\nindex-url '
        f'= "{index_url}"\n\n[targets.cpu]\narch = "cpu"\n\n[targets.old]\narch = "cpu"\nglibc = "2.17"\n'
    )
    assert run_cli("resolve", str(stack)).returncode == 0
    added = run_cli("add", "gamma", cwd=tmp_path)
    assert added.returncode == 0, added.stderr
    assert (
        added.stdout
        == "cpu:\n  + linux-64 alpha 1.0\n  + linux-64 gamma 1.0\nold:\n  + linux-64 alpha 1.0\n  + linux-64 gamma "
        "1.0\n"
    )
    assert 'delta = "*"\ngamma = "*"\n\n[pypi-options]' in stack.read_text()
    one = run_cli("remove", "gamma", "--target", "cpu", cwd=tmp_path)
    assert one.returncode == 0 and one.stdout == "cpu:\n  - linux-64 alpha 1.0\n  - linux-64 gamma 1.0\n", one.stderr
    assert "not re-locked, stale now: old" in one.stderr
    check = run_cli("resolve", str(stack), "--check")
    assert check.returncode == 1 and "old" in check.stdout and "cpu" not in check.stdout
    again = run_cli("add", "gamma==1.0", "--target", "old", "--json", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    said = json.loads(again.stdout)
    assert said["lines"] == ['+ gamma = "==1.0"'] and said["stale"] == ["cpu"]
    assert [(t["target"], t["written"], t["changes"]) for t in said["targets"]] == [
        ("old", True, [])
    ]  # gamma was there: the lock stays as it was
