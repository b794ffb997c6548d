"""An exact Python (issue 44 item 4): `python = "3.11.9"` in a pure-PyPI stack is the one interpreter its lock is
made for (`lockgen.interpreter.<platform>`); materialize makes the venv with exactly that Python, as uv finds it
(this host's own version serves as the pin: no Python can be downloaded here), and refuses another patch release
naming both; `check --lock` refuses a venv on another. `python = "3.11"` stays a range: any 3.11.x."""

from __future__ import annotations

import platform
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lockgen.adapters.lock.lockfile_yaml import load_lock
from lockgen.api.resolve import resolve, stale
from lockgen.core.lock.lock_builder import LockgenMeta
from lockgen.core.stack.spec_parse import parse_stack_text
from lockgen.errors import SpecError
from tests.conftest import run_cli
from tests.wheel_index import Wheel, served_index

HERE = platform.python_version()  # this host's Python: the one exact pin uv can honour without a download
MINOR = "{}.{}".format(*sys.version_info[:2])
ELSEWHERE = f"{MINOR}.{sys.version_info[2] + 50}"  # a patch release this host does not have
STACK = (
    '[stack]\nname = "exact"\npython = "{python}"\n\n[pypi-dependencies]\nalpha = "*"\n\n[pypi-options]\nindex-url = '
    '"{url}"\n\n[targets.cpu]\narch = "cpu"\n'
)
NO_DOWNLOADS = {"UV_PYTHON_DOWNLOADS": "never"}  # uv must not try python-build-standalone (no network here)


@pytest.mark.parametrize(("python", "exact"), [("3.11", None), ("3.11.9", "3.11.9"), ("3.12.0", "3.12.0")])
def test_a_stack_names_a_range_or_one_interpreter(python: str, exact: str | None) -> None:
    spec = parse_stack_text(STACK.format(python=python, url="https://pypi.org/simple"))
    assert (spec.python, spec.python_minor, spec.python_exact) == (python, python[:4], exact)


@pytest.mark.parametrize(
    ("line", "said"),
    [
        (
            'python = "3.11.9.1"',
            'must be a major.minor such as "3.11" (any 3.11.x), or an exact version such as "3.11.9"',
        ),
        ('python = "3.11.x"', "or an exact version"),
    ],
)
def test_what_is_not_a_python_is_refused_on_its_line(line: str, said: str) -> None:
    with pytest.raises(SpecError) as refused:
        parse_stack_text(
            STACK.format(python="3.11", url="https://pypi.org/simple").replace('python = "3.11"', line), "stack.toml"
        )
    assert refused.value.message.startswith("stack.toml:3: ") and said in refused.value.message


def test_a_conda_stack_pins_its_python_among_its_dependencies() -> None:
    text = (
        '[stack]\nname = "c"\nchannels = ["conda-forge"]\npython = "3.11.9"\n[dependencies]\nnumpy = '
        '"*"\n[targets.cpu]\narch = "cpu"\n'
    )
    with pytest.raises(SpecError) as refused:
        parse_stack_text(text, "stack.toml")
    assert 'a stack with [dependencies] pins its conda python there (python = "3.11.9")' in refused.value.message


@pytest.fixture
def index_url(tmp_path: Path) -> Iterator[str]:
    with served_index(tmp_path / "index", [Wheel("alpha", "1.0")]) as url:
        yield url


def locked(folder: Path, python: str, url: str) -> Path:
    folder.mkdir()
    (folder / "stack.toml").write_text(STACK.format(python=python, url=url))
    resolve(folder / "stack.toml")
    return folder / "locks" / "cpu.conda-lock.yml"


def test_the_lock_records_the_exact_interpreter_and_a_range_records_none(tmp_path: Path, index_url: str) -> None:
    exact, ranged = locked(tmp_path / "exact", "3.11.9", index_url), locked(tmp_path / "range", "3.11", index_url)
    meta = LockgenMeta(load_lock(exact))
    assert (meta.interpreter("linux-64"), meta.python("linux-64")) == ("3.11.9", "3.11")
    assert LockgenMeta(load_lock(ranged)).interpreter("linux-64") == "" and "interpreter" not in ranged.read_text()
    assert [p.name for p in load_lock(exact).package] == ["alpha"]
    assert stale(exact.parent.parent / "stack.toml") == []  # resolve --check reads the key as resolve wrote it


def test_a_hand_edited_interpreter_key_is_refused(tmp_path: Path, index_url: str) -> None:
    lock = locked(tmp_path / "exact", "3.11.9", index_url)
    lock.write_text(
        lock.read_text().replace("lockgen.interpreter.linux-64: 3.11.9", "lockgen.interpreter.linux-64: '3.11'")
    )
    result = run_cli("render", str(lock), "--format", "requirements")
    assert (
        result.returncode == 1
        and "lockgen.interpreter.linux-64" in result.stderr
        and "is not a Python version X.Y.Z" in result.stderr
    ), result.stderr


@pytest.mark.slow
def test_materialize_makes_the_venv_with_the_pinned_python_and_refuses_another(tmp_path: Path, index_url: str) -> None:
    here, elsewhere = locked(tmp_path / "here", HERE, index_url), locked(tmp_path / "elsewhere", ELSEWHERE, index_url)
    env = tmp_path / "env"
    made = run_cli("materialize", str(here), "--prefix", str(env), env=NO_DOWNLOADS)
    assert made.returncode == 0, made.stderr
    ran = subprocess.run(
        [env / "bin" / "python", "-c", "import platform, alpha; print(platform.python_version())"],
        capture_output=True,
        text=True,
    )
    assert ran.stdout == f"{HERE}\n", ran.stderr
    assert run_cli("check", "--lock", str(here), "--prefix", str(env)).returncode == 0
    refused = run_cli("materialize", str(elsewhere), "--prefix", str(tmp_path / "other"), env=NO_DOWNLOADS)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr, refused.stderr
    error, hint = refused.stderr.strip().splitlines()[-2:]
    assert error.startswith(
        f"error: the lock was made for Python {ELSEWHERE}, and this host's Python {MINOR} is {HERE} ("
    )
    assert (
        hint.startswith(f"hint: install Python {ELSEWHERE} (uv python install {ELSEWHERE}")
        and f'python = "{MINOR}" under [stack]' in hint
    )
    assert not (tmp_path / "other").exists()
    other = run_cli("check", "--lock", str(elsewhere), "--prefix", str(env))
    assert other.returncode == 1, other.stderr
    error, hint = other.stderr.strip().splitlines()[-2:]
    assert (
        error == f"error: {env} runs Python {HERE} ({env}/bin/python), and the lock was made for Python {ELSEWHERE}"
    ), other.stderr
    assert hint.startswith(
        f"hint: materialize the lock into a new prefix (lockgen materialize {elsewhere} --prefix DIR)"
    )


@pytest.mark.slow
def test_a_kept_verdict_does_not_outlive_the_interpreter(tmp_path: Path, index_url: str) -> None:
    """The venv's Python is outside it: replaced in place (a host upgrade, same path), a check that passed before
    asks it again rather than stand on the verdict its unchanged files would give."""
    lock, env = locked(tmp_path / "here", HERE, index_url), tmp_path / "env"
    assert run_cli("materialize", str(lock), "--prefix", str(env), env=NO_DOWNLOADS).returncode == 0
    outside = tmp_path / "host" / "python"  # stands in for the host's interpreter the venv links to
    outside.parent.mkdir()
    outside.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    outside.chmod(0o755)
    (env / "bin" / "python").unlink()
    (env / "bin" / "python").symlink_to(outside)
    for _ in range(2):  # the work, then the kept verdict
        passed = run_cli("check", "--lock", str(lock), "--prefix", str(env))
        assert passed.returncode == 0, passed.stderr
    outside.write_text("#!/bin/sh\necho 3.11.99-upgraded\n")  # same path, same link: another interpreter
    refused = run_cli("check", "--lock", str(lock), "--prefix", str(env))
    assert (
        refused.returncode == 1
        and f"runs Python 3.11.99-upgraded ({env}/bin/python), and the lock was made for Python {HERE}"
        in refused.stderr
    ), refused.stderr
