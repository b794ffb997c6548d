"""A lock says what it was solved at and stays inside its CUDA window, offline: a loopback PEP 691 index standing
in for PyPI, whose torch pins `cuda-toolkit==13.0.3` and whose `nvidia-cusparse` asks for any `nvidia-nvjitlink`
(as pypi.org's do), with nvJitLink of CUDA 13.0 and of CUDA 13.5 on offer, and a `rich` released after the cut-off."""

from __future__ import annotations

from pathlib import Path

import pytest

from lockgen.adapters.lockfile_yaml import load_lock
from tests.conftest import run_cli
from tests.range_server import RangeServer, Site
from tests.test_newer_releases import UPLOADED, publish
from tests.wheel_index import Wheel

X86 = "cp311-cp311-manylinux_2_28_x86_64"
WHEELS = [
    Wheel("torch", "2.14.1", tag=X86, requires=("cuda-toolkit[cudart]==13.0.3", "nvidia-cusparse", "cuda-bindings<14")),
    Wheel("cuda-toolkit", "13.0.3"),
    Wheel("nvidia-cusparse", "12.6.3.3", requires=("nvidia-nvjitlink",)),
    Wheel("nvidia-nvjitlink", "13.0.88"),
    Wheel("nvidia-nvjitlink", "13.5.37"),
    Wheel("cuda-bindings", "13.0.3"),
    Wheel("cuda-bindings", "13.5.0"),
    Wheel("rich", "13.0.0"),
    Wheel("rich", "14.2.0"),
]


@pytest.fixture
def index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(UPLOADED, "14.2.0", "2026-11-20T00:00:00Z")  # rich 14.2.0: after the cut-off below
    site = Site()
    publish(site, tmp_path / "wheels", WHEELS)
    server = RangeServer(site)
    yield server.url
    server.stop()


def stack(folder: Path, url: str, stack_options: str = "", pypi_options: str = "", deps: str = 'torch = "*"') -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "stack.toml"
    path.write_text(
        f'[stack]\nname = "window"\npython = "3.11"\n{stack_options}\n[pypi-dependencies]\n{deps}\n'
        f'[pypi-options]\nindex-url = "{url}/simple"\n{pypi_options}\n'
        '[targets.h100]\narch = "sm90"\ndriver = "580.65.06"\n'
    )  # CUDA 13.0 GA: the window ends at 13.0
    return path


def versions(folder: Path) -> dict[str, str]:
    return {p.name: p.version for p in load_lock(folder / "locks" / "h100.conda-lock.yml").package}


def test_cuda_versioned_wheels_stay_inside_the_window_and_the_lock_says_so(tmp_path: Path, index: str) -> None:
    path = stack(tmp_path, index)
    done = run_cli("resolve", str(path))
    assert done.returncode == 0, done.stderr
    got = versions(tmp_path)
    assert got["nvidia-nvjitlink"] == "13.0.88" and got["cuda-bindings"] == "13.0.3"  # not CUDA 13.5's
    meta = load_lock(tmp_path / "locks" / "h100.conda-lock.yml").metadata.custom_metadata
    assert "nvidia-nvjitlink<13.1" in meta["lockgen.pypi-constraints.linux-64"].split("; ")
    assert meta["lockgen.cuda-components.linux-64"] == ("within CUDA <= 13.0 (the window): cuda-bindings 13.0.3, cuda-toolkit 13.0.3, nvidia-nvjitlink 13.0.88")


def test_the_stacks_cut_off_reaches_uv_and_the_lock_when_pypi_options_has_none(tmp_path: Path, index: str) -> None:
    path = stack(tmp_path, index, stack_options='exclude-newer = "2026-11-01"', deps='rich = "*"')
    done = run_cli("resolve", str(path))
    assert done.returncode == 0, done.stderr
    assert versions(tmp_path) == {"rich": "13.0.0"}  # 14.2.0 came after the cut-off
    meta = load_lock(tmp_path / "locks" / "h100.conda-lock.yml").metadata.custom_metadata
    assert meta["lockgen.pypi-exclude-newer"] == "2026-11-01"


def test_check_names_a_changed_pypi_cut_off(tmp_path: Path, index: str) -> None:
    path = stack(tmp_path, index, pypi_options='exclude-newer = "2026-11-01"', deps='rich = "*"')
    assert run_cli("resolve", str(path)).returncode == 0
    assert run_cli("resolve", str(path), "--check").returncode == 0
    path.write_text(path.read_text().replace("2026-11-01", "2026-12-01"))
    stale = run_cli("resolve", str(path), "--check")
    assert stale.returncode == 1
    assert stale.stdout == "h100: exclude-newer-changed: exclude-newer changed (PyPI exclude-newer: 2026-11-01 -> 2026-12-01)\n"
    assert run_cli("resolve", str(path)).returncode == 0 and versions(tmp_path) == {"rich": "14.2.0"}
