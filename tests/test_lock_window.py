"""A lock says what it was solved at and stays inside its CUDA window, offline: a loopback PEP 691 index standing
in for PyPI, whose torch pins `cuda-toolkit==13.0.3` and whose `nvidia-cusparse` asks for any `nvidia-nvjitlink`
(as pypi.org's do), with nvJitLink of CUDA 13.0 and of CUDA 13.5 on offer, and a `rich` released after the cut-off;
and torch 2.10.0's cu128 wheel, which pins `cuda-bindings==12.9.4`, for an R570 fleet (CUDA 12.8 natively)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lockgen.adapters.lock.lockfile_yaml import load_lock
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
    Wheel("torch", "2.10.0", tag=X86, requires=("nvidia-cuda-runtime-cu12==12.8.90", "cuda-bindings==12.9.4")),
    Wheel("torch", "2.9.1", tag=X86, requires=("nvidia-cuda-runtime-cu12==12.8.90",)),
    Wheel("nvidia-cuda-runtime-cu12", "12.8.90"),
    Wheel("cuda-bindings", "12.9.4"),
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


def stack(
    folder: Path,
    url: str,
    stack_options: str = "",
    pypi_options: str = "",
    deps: str = 'torch = "*"',
    driver: str = "580.65.06",
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "stack.toml"
    path.write_text(
        f'[stack]\nname = "window"\npython = "3.11"\n{stack_options}\n[pypi-dependencies]\n{deps}\n'
        f'[pypi-options]\nindex-url = "{url}/simple"\n{pypi_options}\n'
        f'[targets.h100]\narch = "sm90"\ndriver = "{driver}"\n'
    )  # 580.65.06, CUDA 13.0 GA: the window ends at 13.0
    return path


def versions(folder: Path) -> dict[str, str]:
    return {p.name: p.version for p in load_lock(folder / "locks" / "h100.conda-lock.yml").package}


def test_cuda_versioned_wheels_stay_inside_the_window_and_the_lock_says_so(tmp_path: Path, index: str) -> None:
    path = stack(tmp_path, index)
    done = run_cli("resolve", str(path))
    assert done.returncode == 0, done.stderr
    got = versions(tmp_path)
    assert got["nvidia-nvjitlink"] == "13.0.88"  # not CUDA 13.5's
    assert got["cuda-bindings"] == "13.5.0"  # NVIDIA's rule: bindings 13.x run on any driver >= 580.65.06
    meta = load_lock(tmp_path / "locks" / "h100.conda-lock.yml").metadata.custom_metadata
    assert {"nvidia-nvjitlink<13.1", "cuda-bindings<14"} <= set(meta["lockgen.pypi-constraints.linux-64"].split("; "))
    assert meta["lockgen.cuda-components.linux-64"] == (
        "within CUDA <= 13.0 (the window): cuda-toolkit 13.0.3, nvidia-nvjitlink 13.0.88; "
        "cuda-bindings 13.5.0 (CUDA 13.5): admitted by its owner's rule, 13.x runs on any driver >= 580.65.06 "
        "(driver 580.65.06)"
    )


@pytest.mark.slow
@pytest.mark.parametrize("deps", ['torch = "*"', 'torch = "==2.10.*"'])
def test_an_r570_fleet_gets_torch_2_10_whose_cuda_bindings_nvidia_runs_on_any_12_driver(
    tmp_path: Path, index: str, deps: str
) -> None:
    """torch 2.10.0+cu128 pins cuda-bindings==12.9.4: NVIDIA's cuda-python runs bindings 12.x on any driver >=
    525.60.13,
    so a strict R570 target (CUDA 12.8 natively) takes it; held to the toolkit window (<12.9), uv fell back to 2.9.1
    and a `torch==2.10.*` pin was unsatisfiable."""
    path = stack(tmp_path, index, deps=deps, driver="570.86.15")
    done = run_cli("resolve", str(path))
    assert done.returncode == 0, done.stderr
    got = versions(tmp_path)
    assert (got["torch"], got["cuda-bindings"], got["nvidia-cuda-runtime-cu12"]) == ("2.10.0", "12.9.4", "12.8.90")
    meta = load_lock(tmp_path / "locks" / "h100.conda-lock.yml").metadata.custom_metadata
    constraints = set(meta["lockgen.pypi-constraints.linux-64"].split("; "))
    assert {"cuda-bindings<13", "nvidia-cuda-runtime-cu12<12.9"} <= constraints
    assert (
        "cuda-bindings 12.9.4 (CUDA 12.9): admitted by its owner's rule, 12.x runs on any driver >= 525.60.13 "
        "(driver 570.86.15)" in meta["lockgen.cuda-components.linux-64"]
    )


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
    assert (
        stale.stdout
        == "h100: exclude-newer-changed: exclude-newer changed (PyPI exclude-newer: 2026-11-01 -> 2026-12-01)\n"
    )
    assert run_cli("resolve", str(path)).returncode == 0 and versions(tmp_path) == {"rich": "14.2.0"}
