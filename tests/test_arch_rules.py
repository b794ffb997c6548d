"""Arch and driver rules on the packaged facts: CUDA windows, build CUDA detection, kernel coverage."""

from __future__ import annotations

import pytest

from lockgen.core.gpu.arch_rules import build_constraint, build_cuda, coverage, cuda_window, judge_build
from lockgen.core.gpu.facts import load_facts, minor_compat_ceiling, native_cuda
from lockgen.core.stack.plan import virtual_packages
from lockgen.core.stack import spec_models
from lockgen.errors import TargetError
from lockgen.model.plan import CandidateBuild
from lockgen.model.spec import Target

FACTS = load_facts()


def gpu(arch: str, driver: str, **extra: object) -> Target:
    """A GPU target as a stack states it (`cuda-compat`, ...), through the stack's rules."""
    validated = spec_models.Target(name="t", arch=arch, driver=driver, **extra)  # type: ignore[arg-type]
    return spec_models.plain_record(validated)  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("driver", "native"),
    [
        ("450.51.05", "11.0"),
        ("520.61.05", "11.8"),
        ("550.54.15", "12.4"),
        ("570.86.10", "12.8"),
        ("575.57.08", "12.9"),
        ("580.65.06", "13.0"),
        ("440.33.01", None),
    ],
)
def test_native_cuda_of_a_driver(driver: str, native: str | None) -> None:
    assert native_cuda(FACTS, driver) == native


def test_minor_compat_extends_to_the_last_minor_of_the_major() -> None:
    assert minor_compat_ceiling(FACTS, "550.54.15") == "12.9"
    assert minor_compat_ceiling(FACTS, "580.65.06") == "13.5"


def test_windows_follow_arch_and_driver() -> None:
    assert (cuda_window(FACTS, gpu("sm80", "550.54.15")).low, cuda_window(FACTS, gpu("sm80", "550.54.15")).high) == (
        "11.0",
        "12.4",
    )
    assert cuda_window(FACTS, gpu("sm80", "550.54.15", **{"cuda-compat": "minor"})).high == "12.9"
    assert cuda_window(FACTS, gpu("sm100", "575.57.08")).low == "12.8"
    assert (
        cuda_window(FACTS, gpu("sm70", "580.65.06", **{"cuda-compat": "minor"})).high == "12.9"
    )  # no CUDA 13 for Volta
    assert cuda_window(FACTS, gpu("sm90", "575.57.08", cuda="12.6")).low == "12.6"


@pytest.mark.parametrize(
    ("arch", "driver", "fragment"),
    [
        ("sm100", "550.54.15", "needs CUDA >= 12.8"),
        ("sm90", "440.33.01", "runs no CUDA release"),
    ],
)
def test_driver_too_old_for_the_arch_is_an_error(arch: str, driver: str, fragment: str) -> None:
    with pytest.raises(TargetError) as caught:
        cuda_window(FACTS, gpu(arch, driver))
    assert fragment in caught.value.message and caught.value.hint


@pytest.mark.parametrize("arch", ["sm50", "sm52", "sm60", "sm61", "sm70"])
def test_a_driver_past_the_archs_last_branch_is_refused_naming_it(arch: str) -> None:
    """NVIDIA's deprecation schedule: R580 is the last driver branch for Maxwell, Pascal and Volta, so a V100 on
    590.44.01 (CUDA 13.1 natively) has no driver that supports it and gets no lock; on R580 it does."""
    with pytest.raises(TargetError) as caught:
        cuda_window(FACTS, gpu(arch, "590.44.01"))
    assert (
        "driver 590.44.01 is past R580, the last driver branch that supports Maxwell, Pascal and Volta GPUs"
        in caught.value.message
    )
    assert "R580" in caught.value.hint
    assert cuda_window(FACTS, gpu(arch, "580.95.05")).high == "12.9"
    assert cuda_window(FACTS, gpu("sm75", "590.44.01")).high == "13.1"  # Turing is still driven


def test_cuda_pin_outside_the_window_is_an_error() -> None:
    with pytest.raises(TargetError, match="outside"):
        cuda_window(FACTS, gpu("sm90", "550.54.15", cuda="12.8"))


def test_unknown_arch_is_an_error() -> None:
    with pytest.raises(TargetError, match="unknown arch `sm99`"):
        cuda_window(FACTS, gpu("sm99", "575.57.08"))


@pytest.mark.parametrize(
    ("build", "depends", "cuda"),
    [
        ("cuda129_mkl_py311_h49b8cc7_300", (), "12.9"),
        ("cuda118_py311h4ee7bbc_301", (), "11.8"),
        ("py3.11_cuda12.1_cudnn9.1.0_0", (), "12.1"),
        ("py3.8_cuda10.1.243_cudnn7.6.3_0", (), "10.1"),
        ("cpu_mkl_py311_h338015a_100", (), None),
        ("h1234_0", ("cuda-version >=12.6,<13",), "12.6"),
        ("h1234_0", (), None),
    ],
)
def test_build_cuda(build: str, depends: tuple[str, ...], cuda: str | None) -> None:
    assert build_cuda(CandidateBuild(name="pytorch", version="2.5", build=build, channel="", depends=depends)) == cuda


@pytest.mark.parametrize(
    ("arch_list", "cc", "expected"),
    [
        ("5.0;6.0;7.0;7.5;8.0;8.6;9.0+PTX", "10.0", "ptx"),
        ("5.0;6.0;7.0;7.5;8.0;8.6;9.0+PTX", "8.9", "sass"),  # sm_86 cubin runs on 8.9
        ("5.0;6.0;7.0;7.5;8.0;8.6;9.0;10.0;12.0+PTX", "10.3", "sass"),
        ("7.5;8.0;8.6;9.0;10.0;12.0+PTX", "11.0", None),  # PTX never JITs down
        ("7.5;8.0;8.6;9.0;10.0;12.0+PTX", "7.0", None),
    ],
)
def test_coverage(arch_list: str, cc: str, expected: str | None) -> None:
    assert coverage(arch_list, cc) == expected


def _candidate(
    build: str, channel: str = "https://conda.anaconda.org/conda-forge/linux-64/x.conda", version: str = "2.6.0"
) -> CandidateBuild:
    return CandidateBuild(name="pytorch", version=version, build=build, channel=channel, depends=())


def test_ptx_only_build_needs_allow_ptx_jit() -> None:
    sm100 = gpu("sm100", "575.57.08")
    window = cuda_window(FACTS, sm100)
    verdict = judge_build(FACTS, sm100, window, "linux-64", _candidate("cuda120_py312_0"))
    assert not verdict.allowed and verdict.kind == "ptx" and "PTX JIT" in verdict.reason
    jit = gpu("sm100", "575.57.08", **{"allow-ptx-jit": True})
    assert judge_build(FACTS, jit, cuda_window(FACTS, jit), "linux-64", _candidate("cuda120_py312_0")).allowed
    assert judge_build(FACTS, sm100, window, "linux-64", _candidate("cuda129_py312_0")).allowed


def test_official_pytorch_channel_builds_use_official_lists() -> None:
    sm100 = gpu("sm100", "575.57.08", **{"allow-ptx-jit": True})
    build = _candidate(
        "py3.12_cuda12.4_cudnn9.1.0_0", "https://conda.anaconda.org/pytorch/linux-64/pytorch.tar.bz2", "2.5.1"
    )
    verdict = judge_build(FACTS, sm100, cuda_window(FACTS, sm100), "linux-64", build)
    assert not verdict.allowed and verdict.kind == "no-kernels"  # official cu124 list ends at 9.0 without PTX


def test_cpu_and_gpu_targets_exclude_each_others_builds() -> None:
    cpu = Target(name="c", arch="cpu")
    assert judge_build(FACTS, cpu, None, "linux-64", _candidate("cpu_mkl_0")).allowed
    assert not judge_build(FACTS, cpu, None, "linux-64", _candidate("cuda129_0")).allowed
    sm90 = gpu("sm90", "575.57.08")
    assert not judge_build(FACTS, sm90, cuda_window(FACTS, sm90), "linux-64", _candidate("cpu_mkl_0")).allowed


def test_build_constraint_admits_exactly_the_allowed_builds() -> None:
    sm90 = gpu("sm90", "575.57.08")
    window = cuda_window(FACTS, sm90)
    verdicts = [
        judge_build(FACTS, sm90, window, "linux-64", _candidate(b)) for b in ("cuda129_a", "cpu_b", "cuda130_c")
    ]
    assert build_constraint("pytorch", verdicts) == "pytorch[build='^(cuda129_a)$']"


def test_virtual_packages_are_stated_not_detected() -> None:
    vps = {
        v.name: v
        for v in virtual_packages(
            FACTS, gpu("sm90", "570.86.10", glibc="2.34"), "linux-aarch64", cuda_window(FACTS, gpu("sm90", "570.86.10"))
        )
    }
    assert vps["__cuda"].version == "12.8" and vps["__glibc"].version == "2.34"
    assert vps["__archspec"].build == "aarch64" and vps["__cuda_arch"].version == "9.0"
    cpu = {v.name for v in virtual_packages(FACTS, Target(name="c", arch="cpu"), "linux-64", None)}
    assert "__cuda" not in cpu and "__cuda_arch" not in cpu
