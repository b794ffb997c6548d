"""A CPU target never gets a CUDA build: offline, against two loopback PEP 691 indexes the test builds, one
standing in for PyPI (torch as CUDA builds pulling nvidia-* and cuda-toolkit wheels, as pypi.org's Linux
torch is) and one for PyTorch's CPU index (`2.9.1+cpu` wheels, and a numpy the target must not take)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lockgen.adapters.lock.lockfile_yaml import load_lock
from tests.conftest import run_cli
from tests.range_server import RangeServer, Site
from tests.test_newer_releases import publish
from tests.wheel_index import Wheel

X86 = "cp311-cp311-manylinux_2_28_x86_64"
ARM = "cp311-cp311-manylinux_2_28_aarch64"
CUDA_TORCH = ("cuda-toolkit[cudart]==13.0.3", "nvidia-cublas==13.0.0", "triton==3.5.0", "filelock")
PYPI = [Wheel("torch", "2.14.1", tag=t, requires=CUDA_TORCH) for t in (X86, ARM)] + [
    Wheel("cuda-toolkit", "13.0.3"),
    Wheel("nvidia-cublas", "13.0.0"),
    Wheel("triton", "3.5.0"),
    Wheel("filelock", "3.0.0"),
    Wheel("numpy", "2.0.0"),
    Wheel("needs-torch", "1.0", requires=("torch",)),
]
CPU = [Wheel("torch", "2.9.1+cpu", tag=t, requires=("filelock",)) for t in (X86, ARM)] + [
    Wheel("torchvision", "0.24.1+cpu", tag=X86, requires=("torch==2.9.1",)),
    Wheel("numpy", "1.0.0"),
]


@pytest.fixture
def indexes(tmp_path: Path):
    pypi, cpu = Site(), Site()
    publish(pypi, tmp_path / "pypi-wheels", PYPI)
    publish(cpu, tmp_path / "cpu-wheels", CPU)
    servers = RangeServer(pypi), RangeServer(cpu)
    yield tuple(s.url for s in servers)
    for server in servers:
        server.stop()


def stack(
    folder: Path, pypi: str, deps: str, options: str = "", platforms: str = '["linux-64", "linux-aarch64"]'
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "stack.toml"
    path.write_text(
        '[stack]\nname = "cpu"\npython = "3.11"\nplatforms = '
        f"{platforms}\n[pypi-dependencies]\n{deps}\n[pypi-options]\nindex-url = "
        f'"{pypi}/simple"\n{options}\n[targets.cpu]\narch = "cpu"\n'
    )
    return path


@pytest.mark.slow
def test_a_cpu_target_takes_torch_from_the_cpu_index_and_no_cuda_package(tmp_path: Path, indexes) -> None:
    pypi, cpu = indexes
    path = stack(
        tmp_path,
        pypi,
        'torch = ">=2.4"\ntorchvision = "*"\nnumpy = "*"',
        f'torch-indexes = {{ cpu = "{cpu}/simple" }}',
        platforms='["linux-64"]',
    )
    done = run_cli("resolve", str(path))
    assert done.returncode == 0, done.stderr
    lock = load_lock(tmp_path / "locks" / "cpu.conda-lock.yml")
    picked = {p.name: p for p in lock.package}
    assert picked["torch"].version == "2.9.1+cpu" and picked["torch"].url.startswith(cpu)
    assert picked["torchvision"].version == "0.24.1+cpu"
    assert picked["numpy"].version == "2.0.0" and picked["numpy"].url.startswith(
        pypi
    )  # only the torch family is routed
    assert not [n for n in picked if n.startswith(("nvidia-", "cuda-")) or n == "triton"]
    assert lock.meta("torch-index.linux-64") == f"torch torchvision @ {cpu}/simple"
    assert (
        f"cpu on linux-64: torch 2.9.1+cpu from torch torchvision @ {cpu}/simple" in done.stderr
    )  # resolve's decision line
    assert lock.meta("decision.linux-64").endswith("a CPU target takes no PyPI build (cpu-target)")


@pytest.mark.slow
def test_on_aarch64_too_and_torchvision_alone_routes_torch(tmp_path: Path, indexes) -> None:
    """PyPI's aarch64 torch is a CUDA build from 2.11 on (the facts), so aarch64 takes the CPU index as well."""
    pypi, cpu = indexes
    path = stack(
        tmp_path, pypi, 'torch = "*"', f'torch-indexes = {{ cpu = "{cpu}/simple" }}', platforms='["linux-aarch64"]'
    )
    done = run_cli("resolve", str(path))
    assert done.returncode == 0, done.stderr
    lock = load_lock(tmp_path / "locks" / "cpu.conda-lock.yml")
    assert {p.name: p.version for p in lock.package} == {"torch": "2.9.1+cpu", "filelock": "3.0.0"}


@pytest.mark.slow
def test_torch_reached_only_through_another_package_is_refused_not_locked(tmp_path: Path, indexes) -> None:
    pypi, cpu = indexes
    path = stack(
        tmp_path, pypi, 'needs-torch = "*"', f'torch-indexes = {{ cpu = "{cpu}/simple" }}', platforms='["linux-64"]'
    )
    done = run_cli("resolve", str(path))
    assert done.returncode == 1, done.stderr
    assert "error: target `cpu` on linux-64 is a CPU target but would get CUDA packages" in done.stderr
    assert "cuda-toolkit 13.0.3" in done.stderr and "nvidia-cublas" in done.stderr
    assert "hint: name torch in [pypi-dependencies]" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "locks" / "cpu.conda-lock.yml").exists()


@pytest.mark.slow
def test_an_unreachable_cpu_index_is_named_never_replaced_by_pypi(tmp_path: Path, indexes) -> None:
    pypi, _ = indexes
    closed = RangeServer(Site())
    url = closed.url
    closed.stop()
    path = stack(tmp_path, pypi, 'torch = "*"', f'torch-indexes = {{ cpu = "{url}/simple" }}', platforms='["linux-64"]')
    done = run_cli("resolve", str(path))
    assert done.returncode == 1, done.stderr
    assert "error:" in done.stderr and f"torch @ {url}/simple is where target `cpu`'s torch comes from" in done.stderr
    assert "hint:" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    "options, said",
    [
        ('torch-indexes = { gpu = "https://example.org/whl/cu128" }', "`gpu` is not a variant"),
        ('torch-indexes = { cpu = "ftp://example.org/cpu" }', "must be an http(s) or file URL"),
    ],
)
def test_a_bad_torch_index_is_one_error_with_a_hint(tmp_path: Path, options: str, said: str) -> None:
    path = stack(tmp_path, "https://pypi.org", 'torch = "*"', options)
    done = run_cli("resolve", str(path))
    assert done.returncode == 1 and said in done.stderr and "hint:" in done.stderr and "Traceback" not in done.stderr
