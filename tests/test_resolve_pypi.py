"""The PyPI layer against real PyPI (uv reads wheel metadata only): per-target torch choices on the
torch-pypi example, the failure cases of the arch and driver rules, conda + PyPI stacks, bad input."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from lockgen.api import resolve as api
from lockgen.adapters.lock.lockfile_yaml import load_lock
from lockgen.errors import ChannelError, SpecError, TargetError, UnsatisfiableError
from tests.conftest import REPO, run_cli

pytestmark = [pytest.mark.network, pytest.mark.slow]  # every test here solves with uv or builds an image first
PYPI_EXAMPLE = REPO / "envs" / "examples" / "torch-pypi" / "stack.toml"
TARGETS = ("v100", "a100", "h100", "h100-r580ga", "b200", "gh200")


def release(version: str) -> tuple[int, int]:
    major, minor = version.split("+")[0].split(".")[:2]
    return int(major), int(minor)


def versions(lock_path: Path) -> dict[str, str]:
    return {p.name: p.version for p in load_lock(lock_path).package}


@pytest.fixture(scope="module")
def pypi_locks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("pypi") / "torch-pypi"
    shutil.copytree(PYPI_EXAMPLE.parent, folder, ignore=shutil.ignore_patterns("locks"))
    started = time.perf_counter()
    api.resolve(folder / "stack.toml")
    assert time.perf_counter() - started < 30, "five uv resolutions with torch should take seconds, not minutes"
    return folder / "locks"


def test_each_target_gets_the_torch_its_arch_and_driver_allow(pypi_locks: Path) -> None:
    picked = {t: versions(pypi_locks / f"{t}.conda-lock.yml") for t in TARGETS}
    assert picked["v100"]["torch"].startswith("2.10.")  # sm70 kernels end with 2.10 (cu128)
    assert picked["a100"]["torch"].startswith("2.6.")  # driver 550 runs CUDA 12.4: cu124 is the newest
    assert picked["a100"]["nvidia-cuda-runtime-cu12"].startswith("12.4.")
    assert release(picked["b200"]["torch"]) >= (2, 8)
    assert release(picked["h100-r580ga"]["torch"]) == (2, 14)  # 13.0 GA's driver runs the CUDA 13.0.3 build natively
    decision = load_lock(pypi_locks / "a100.conda-lock.yml").meta("decision.linux-64")
    assert (
        decision.startswith("torch 2.6.") and "2.7 passed over by driver-floor" in decision and "560.28.03" in decision
    )
    assert release(picked["gh200"]["torch"]) >= (2, 11) and picked["gh200"]["nvidia-cuda-runtime"].startswith("13.")
    gh200 = load_lock(pypi_locks / "gh200.conda-lock.yml")
    assert gh200.metadata.platforms == ("linux-aarch64",) and all(
        "aarch64" in p.url or "none-any" in p.url for p in gh200.package
    )
    assert all(p.manager == "pip" and p.hash.sha256 for p in gh200.package)


def test_committed_pypi_locks_are_reproduced(pypi_locks: Path) -> None:
    for target in TARGETS:
        name = f"{target}.conda-lock.yml"
        assert (PYPI_EXAMPLE.parent / "locks" / name).read_bytes() == (pypi_locks / name).read_bytes(), target


def test_conda_lock_reads_pip_entries(pypi_locks: Path) -> None:
    from conda_lock.lockfile import parse_conda_lock_file

    lock = parse_conda_lock_file(pypi_locks / "h100.conda-lock.yml")
    assert {p.manager for p in lock.package} == {"pip"}


def write(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "stack.toml").write_text(text)
    return folder / "stack.toml"


PURE = '[stack]\nname = "p"\npython = "3.11"\n[pypi-dependencies]\n{deps}\n[targets.t]\narch = "{arch}"\n{extra}\n'


def test_gh200_on_an_old_driver_fails_naming_what_to_change(tmp_path: Path) -> None:
    stack = write(
        tmp_path,
        PURE.format(deps='torch = "*"', arch="sm90", extra='driver = "570.86.10"\nplatforms = ["linux-aarch64"]'),
    )
    with pytest.raises(TargetError) as caught:
        api.resolve(stack)
    assert "no torch release on PyPI fits sm90" in caught.value.message
    assert (
        "raise `driver` to >= 580.65.06" in caught.value.hint
        and 'add `torch-variants = ["cu126"]`' in caught.value.hint
    )


def test_jetson_thor_on_its_580_00_driver_gets_the_aarch64_cu130_torch(tmp_path: Path) -> None:
    stack = write(
        tmp_path,
        PURE.format(
            deps='torch = "*"',
            arch="sm110",
            extra='driver = "580.00"\nplatforms = ["linux-aarch64"]\n[pypi-options]\nexclude-newer = "2026-12-01"',
        ),
    )
    api.resolve(stack)
    lock = load_lock(tmp_path / "locks" / "t.conda-lock.yml")
    picked = {p.name: p for p in lock.package}
    assert release(picked["torch"].version) == (2, 14) and "aarch64" in picked["torch"].url
    assert picked["cuda-toolkit"].version.startswith("13.0.")
    assert lock.meta("cuda-window") == "13.0..13.0 (native 13.0)"


def test_a_pinned_torch_the_driver_cannot_run_is_refused(tmp_path: Path) -> None:
    """Refused before uv is asked: PyPI's releases are judged on its page, the pinned one by the driver floor."""
    stack = write(tmp_path, PURE.format(deps='torch = "==2.7.*"', arch="sm80", extra='driver = "550.54.15"'))
    with pytest.raises(TargetError) as caught:
        api.resolve(stack)
    assert "torch 2.7 on PyPI (linux-64): built with CUDA 12.6 (needs driver >= 560.28.03)" in caught.value.hint


def test_small_pure_pypi_stack_and_cpu_target(tmp_path: Path) -> None:
    stack = write(tmp_path, PURE.format(deps='six = "==1.16.0"\nidna = ">=3"', arch="cpu", extra=""))
    api.resolve(stack)
    picked = versions(tmp_path / "locks" / "t.conda-lock.yml")
    assert picked["six"] == "1.16.0" and "idna" in picked


def test_conda_base_with_pypi_on_top(example_copy: Path, snapshot: Path) -> None:
    text = example_copy.read_text().replace(
        "[targets.a100]", '[pypi-dependencies]\nsix = "*"\njinja2 = "*"\n\n[targets.a100]'
    )
    example_copy.write_text(text)
    api.resolve(example_copy, targets=["h100"], aliases=[f"conda-forge={snapshot}"])
    lock = load_lock(example_copy.parent / "locks" / "h100.conda-lock.yml")
    pip = {p.name for p in lock.package if p.manager == "pip"}
    conda = {p.name for p in lock.package if p.manager == "conda"}
    assert "six" in pip and "jinja2" in conda and "jinja2" not in pip  # conda provides jinja2: held, not duplicated
    assert lock.meta("python.linux-64") == "3.12"
    assert "jinja2==" in lock.meta("pypi-constraints.linux-64")


def test_conflicting_conda_and_pypi_pins(example_copy: Path, snapshot: Path) -> None:
    text = example_copy.read_text().replace(
        "[targets.a100]", '[pypi-dependencies]\njinja2 = "==3.0.0"\n\n[targets.a100]'
    )
    example_copy.write_text(text)
    with pytest.raises(UnsatisfiableError, match="PyPI requirements are unsatisfiable"):
        api.resolve(example_copy, targets=["h100"], aliases=[f"conda-forge={snapshot}"])


def test_bad_pypi_input_fails_cleanly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SpecError, match="PEP 440"):
        api.resolve(write(tmp_path / "a", PURE.format(deps='torch = ">>2"', arch="cpu", extra="")))
    with pytest.raises(UnsatisfiableError):
        api.resolve(write(tmp_path / "b", PURE.format(deps='no-such-project-lockgen-test = "*"', arch="cpu", extra="")))
    # uv retries a refused connection with back-off (about 9 s a run); the error is the same after none
    monkeypatch.setenv("UV_HTTP_RETRIES", "0")
    unreachable = (
        PURE.format(deps='six = "*"', arch="cpu", extra="")
        + '[pypi-options]\nindex-url = "http://127.0.0.1:9/simple"\n'
    )
    with pytest.raises(ChannelError, match="cannot reach the package index"):
        api.resolve(write(tmp_path / "c", unreachable))
    result = run_cli("resolve", str(tmp_path / "c" / "stack.toml"))
    assert result.returncode == 1 and "error:" in result.stderr and "Traceback" not in result.stderr
    for case in ("a", "b", "c"):
        assert not (tmp_path / case / "locks").exists()


def test_check_reports_a_changed_pypi_spec(tmp_path: Path) -> None:
    stack = write(tmp_path, PURE.format(deps='six = "==1.16.0"', arch="cpu", extra=""))
    api.resolve(stack)
    assert api.stale(stack) == []
    stack.write_text(stack.read_text().replace("==1.16.0", "==1.17.0"))
    assert [(r.kind, r.detail.endswith("(pypi six: ==1.16.0 -> ==1.17.0)")) for r in api.stale(stack)] == [
        ("spec-changed", True)
    ]


def test_update_one_pip_package_holds_the_others(tmp_path: Path) -> None:
    stack = write(
        tmp_path,
        PURE.format(deps='six = "*"\nidna = "*"', arch="cpu", extra="")
        + '[pypi-options]\nexclude-newer = "2021-01-01"\n',
    )
    api.resolve(stack)
    old = versions(tmp_path / "locks" / "t.conda-lock.yml")
    stack.write_text(stack.read_text().replace('exclude-newer = "2021-01-01"', 'exclude-newer = "2025-01-01"'))
    api.resolve(stack, updates=["idna"])
    new = versions(tmp_path / "locks" / "t.conda-lock.yml")
    assert new["six"] == old["six"] and new["idna"] != old["idna"]
