"""A path two wheels of a lock both install: the CUDA wheels of a PyTorch release (nvidia-cublas-cu12,
nvidia-cudnn-cu12, ...) each ship the same empty `nvidia/__init__.py`, and pip and uv install them side by
side. Stating the same bytes is no clobber (whichever lands last, the file is the same) and materialize and
check --lock accept it; stating other bytes at one path is a clobber (`test_conformance`), and materialize refuses the
lock (the file
uv left is one wheel's, which the other's RECORD proof refuses first)."""

from __future__ import annotations

import functools
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from lockgen.api import resolve as api
from lockgen.api.check import check_lock
from lockgen.api.materialize import materialize
from lockgen.errors import LockFormatError
from lockgen.model.requests import Prefix
from tests.conftest import _QuietHandler
from tests.test_pypi_offline import stack
from tests.wheel_index import Wheel, build_index

SITE = "lib/python3.11/site-packages"
WHEELS = [
    Wheel("blas-parts", "1.0", files={"nvidia/__init__.py": "", "nvidia/blas/lib.txt": "blas\n"}),
    Wheel("dnn-parts", "1.0", files={"nvidia/__init__.py": "", "nvidia/dnn/lib.txt": "dnn\n"}),
    Wheel("other-parts", "1.0", files={"nvidia/__init__.py": "import os\n"}),
]


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = build_index(tmp_path_factory.mktemp("index"), WHEELS)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    server.shutdown()


def _lock(tmp_path: Path, index: str, deps: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    path = stack(tmp_path, index, deps)
    path.write_text(path.read_text().replace('platforms = ["linux-64", "linux-aarch64"]', 'platforms = ["linux-64"]'))
    api.resolve(path)
    return tmp_path / "locks" / "cpu.conda-lock.yml"


@pytest.mark.slow
def test_the_same_bytes_from_two_wheels_are_one_file(
    tmp_path: Path, index: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock = _lock(tmp_path, index, 'blas-parts = "*"\ndnn-parts = "*"', monkeypatch)
    prefix, _ = materialize(lock, None, tmp_path / "env", lambda _: None)
    assert (prefix / SITE / "nvidia" / "__init__.py").read_text() == ""
    report = check_lock(lock, Prefix(prefix)).report
    assert report.clean and not report.clobbered, report.lines()


@pytest.mark.slow
def test_other_bytes_at_one_path_are_a_clobber(tmp_path: Path, index: str, monkeypatch: pytest.MonkeyPatch) -> None:
    lock = _lock(tmp_path, index, 'blas-parts = "*"\nother-parts = "*"', monkeypatch)
    with pytest.raises(
        LockFormatError, match=f"{SITE}/nvidia/__init__.py"
    ):  # the file left is one wheel's, not the other's RECORD
        materialize(lock, None, tmp_path / "env", lambda _: None)
    assert not (tmp_path / "env").exists()
