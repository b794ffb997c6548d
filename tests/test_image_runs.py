"""Every image export writes starts its environment's Python, as podman runs it; an export whose image could not
is refused with one `error:` and a `hint:` naming the ways out, and writes nothing. A pure-PyPI lock is a venv,
whose `bin/python` links to a Python outside it: on a base image that holds this host's Debian interpreter
(`tests/python_base.py`), `podman run --rm IMAGE python -c …` imports the lock's wheel; without a base, on a
base with no Python, as an image index (which takes no base), and as an existing venv linking to a Python the
base lacks, the export is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from lockgen.api.export import export
from lockgen.model.requests import ExportRequest, FromLock
from lockgen.errors import UserError
from tests.conftest import run_cli
from tests.image_run import podman_run
from tests.python_base import PYTHON, python_base
from tests.wheel_index import Wheel, build_index

TAG = "cpu-linux-64"


@pytest.fixture
def pure_lock(tmp_path: Path) -> Path:
    """A pure-PyPI lock of one wheel (`hello`, from a file:// index the test writes) for this host's Python."""
    index = build_index(
        tmp_path / "index", [Wheel("hello", "1.0", files={"hello/greet.py": "WORDS = 'from the lock'\n"})]
    )
    stack = tmp_path / "stack" / "stack.toml"
    stack.parent.mkdir()
    stack.write_text(
        f'[stack]\nname = "pure"\npython = "{PYTHON}"\nplatforms = ["linux-64"]\n[pypi-dependencies]\n'
        f'hello = "*"\n[pypi-options]\nindex-url = "{(index / "simple").as_uri()}"\n[targets.cpu]\narch = "cpu"\n'
    )
    done = run_cli("resolve", str(stack))
    assert done.returncode == 0, done.stderr
    return stack.parent / "locks" / "cpu.conda-lock.yml"


def _refused(done, out: Path) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    """The refusal's error and hint lines; nothing written."""
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    error, hint = done.stderr.splitlines()[-2:]
    assert error.startswith("error: ") and hint.startswith("hint: ") and not out.exists()
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".lockgen-export-")]
    return error, hint


def test_a_venv_with_no_python_in_its_image_is_refused_naming_the_ways_out(tmp_path: Path, pure_lock: Path) -> None:
    out = tmp_path / "img"
    error, hint = _refused(run_cli("export", str(pure_lock), "--out", str(out)), out)
    assert error == (
        f"error: the lock's environment is a venv (PyPI packages only) that runs on python{PYTHON}, and no "
        f"--base image brings one at /usr/local/bin/python{PYTHON} or /usr/bin/python{PYTHON}: the image could "
        "not start its Python"
    )
    assert f"pass --base with an image that has /usr/local/bin/python{PYTHON} or /usr/bin/python{PYTHON}" in hint
    assert f'give the stack a conda python (python = "{PYTHON}.*" in [dependencies])' in hint
    bare = python_base(tmp_path / "glibc-only", python=False)  # the C libraries, no interpreter
    error, _ = _refused(run_cli("export", str(pure_lock), "--base", str(bare), "--out", str(out)), out)
    assert "and the base image has no file at" in error
    with pytest.raises(UserError, match="an image index takes no --base"):
        export(ExportRequest(pure_lock, out, FromLock(("linux-64",), True)), lambda _: None)
    assert not out.exists()


def test_an_existing_venv_linking_outside_itself_needs_that_python_in_its_base(tmp_path: Path, pure_lock: Path) -> None:
    prefix = tmp_path / "env"
    done = run_cli("materialize", str(pure_lock), "--prefix", str(prefix))
    assert done.returncode == 0, done.stderr
    interpreter = (prefix / "bin" / "python").resolve()
    out = tmp_path / "img"
    error, hint = _refused(run_cli("export", str(pure_lock), "--from-prefix", str(prefix), "--out", str(out)), out)
    assert error.startswith("error: the environment's bin/python links to /") and "outside it" in error
    assert "and the image has no file there: it could not start its Python" in error
    assert hint.startswith("hint: pass --base with an image that has /")
    bare = python_base(tmp_path / "glibc-only", python=False)
    _refused(
        run_cli("export", str(pure_lock), "--from-prefix", str(prefix), "--base", str(bare), "--out", str(out)), out
    )
    assert interpreter.is_file()  # the venv itself runs here: only the image would lack its Python


@pytest.mark.slow
def test_a_pure_pypi_image_on_a_base_with_its_python_runs_it(tmp_path: Path, pure_lock: Path) -> None:
    base = python_base(tmp_path / "python-base")
    out = tmp_path / "img"
    done = run_cli("export", str(pure_lock), "--base", str(base), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert f"the venv runs on the base image's /usr/bin/python{PYTHON}" in done.stderr
    ran = podman_run(
        out, TAG, "python", "-c", "import hello.greet, sys; print(hello.VERSION, hello.greet.WORDS, sys.prefix)"
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "1.0 from the lock /opt/env\n"
    checked = run_cli("check", "--image", str(out), "--lock", str(pure_lock))
    assert checked.returncode == 0, checked.stdout + checked.stderr
