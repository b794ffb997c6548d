"""The rules the sourced facts of issues 15 and 28 feed: strict means the GA driver of the CUDA minor a wheel was
built with (never an update's), tegra builds never take the generic list, pytorch-channel releases newer than the facts
take the
newest known list of their variant, and every added fact keeps a source that says how sure it is."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from lockgen.adapters.lock.lockfile_yaml import load_lock
from lockgen.core.gpu.arch_rules import cuda_window, judge_build
from lockgen.core.gpu.facts import load_facts, native_cuda
from lockgen.core.pypi.pypi_rules import torch_admission
from lockgen.core.stack import spec_models
from lockgen.errors import TargetError
from lockgen.model.plan import CandidateBuild
from lockgen.model.spec import Target
from packaging.version import Version
from tests.conftest import REPO, run_cli

FACTS = load_facts()


def gpu(arch: str, driver: str, **extra: object) -> Target:
    """A GPU target as a stack states it (`cuda-compat`, ...), through the stack's rules."""
    validated = spec_models.Target(name="t", arch=arch, driver=driver, **extra)  # type: ignore[arg-type]
    return spec_models.plain_record(validated)  # type: ignore[no-any-return]


def admitted(target: Target, platform: str = "linux-64") -> tuple[str, ...]:
    return torch_admission(FACTS, target, platform, cuda_window(FACTS, target)).allowed


# NVIDIA CUDA Compatibility guide / release notes, Table 3 "CUDA Toolkit and Corresponding Driver Versions" (Linux, GA
# rows)
TABLE_3_GA = {
    "12.4": "550.54.14",
    "12.6": "560.28.03",
    "12.8": "570.26",
    "12.9": "575.51.03",
    "13.0": "580.65.06",
    "13.1": "590.44.01",
    "13.2": "595.45.04",
}


def test_strict_is_by_minor_the_floor_is_the_ga_driver_of_each_cuda_minor() -> None:
    for cuda, driver in TABLE_3_GA.items():
        assert FACTS.cuda_toolkits[cuda].min_driver == driver, cuda
        assert native_cuda(FACTS, driver) == cuda  # the GA driver runs every update of its minor natively
    assert FACTS.cuda_toolkits["13.0"].updates["13.0.2"].min_driver == "580.95.05"  # kept, as information only
    ga = gpu("sm90", "580.65.06")
    for platform in ("linux-64", "linux-aarch64"):  # GH200 on 13.0 GA's driver gets the cu130 builds (2.11-2.14)
        assert max(admitted(ga, platform), key=Version) == "2.14", platform
        assert {"2.11", "2.12", "2.13", "2.14"} <= set(admitted(ga, platform))
    assert max(admitted(gpu("sm90", "580.95.05")), key=Version) == "2.14"  # 2.15 is CUDA 13.2: driver >= 595.45.04
    refused = dict(torch_admission(FACTS, ga, "linux-64", cuda_window(FACTS, ga)).refused)["2.15"]
    assert "CUDA 13.2 (needs driver >= 595.45.04)" in refused
    assert "2.7" not in admitted(gpu("sm80", "560.28.02")) and "2.7" in admitted(gpu("sm80", "560.28.03"))


def test_cuda_13_4_and_13_5_have_floors_from_drivers_nvidia_ships_for_them() -> None:
    """Table 3 of 13.4/13.5 was not read: their floors are drivers NVIDIA ships for them (the cuda-compat-13-4 package,
    the driver manifest whose compat package is cuda13.5), conservative, each citing NVIDIA's file and saying so."""
    for cuda, driver in {"13.4": "615.71.09", "13.5": "620.70.06"}.items():
        toolkit = FACTS.cuda_toolkits[cuda]
        assert toolkit.min_driver == driver
        assert any("developer.download.nvidia.com" in s for s in toolkit.sources) and "unverified" in " ".join(
            toolkit.sources
        )
        assert native_cuda(FACTS, driver) == cuda
    assert native_cuda(FACTS, "615.40.01") == "13.3"  # an older R615 is not known to run 13.4: the CUDA before
    assert native_cuda(FACTS, "620.10.01") == "13.4"


def test_a_driver_past_the_newest_floor_reads_as_the_newest_known_cuda_and_says_so() -> None:
    window = cuda_window(FACTS, gpu("sm90", "650.10.02"))
    assert window.native == window.high == "13.5"
    assert "13.5 is the newest CUDA lockgen's facts know" in window.reason
    assert "newest CUDA" not in cuda_window(FACTS, gpu("sm90", "595.45.04")).reason


def _build(
    build: str,
    depends: tuple[str, ...],
    channel: str = "https://conda.anaconda.org/conda-forge/linux-aarch64",
    name: str = "pytorch",
    version: str = "2.7.1",
) -> CandidateBuild:
    return CandidateBuild(name=name, version=version, build=build, channel=channel, depends=depends)


def test_a_tegra_build_is_judged_by_the_tegra_list_never_the_generic_one() -> None:
    target = gpu("sm90", "575.57.08")
    window = cuda_window(FACTS, target)
    generic = judge_build(
        FACTS, target, window, "linux-aarch64", _build("cuda129_generic_h1_0", ("cuda-version >=12.9,<13",))
    )
    tegra = judge_build(
        FACTS,
        target,
        window,
        "linux-aarch64",
        _build("cuda129_generic_h2_0", ("cuda-version >=12.9,<13", "arm-variant * tegra")),
    )
    assert generic.allowed and generic.kind == "native"
    assert not tegra.allowed and tegra.kind == "ptx" and "8.7+PTX" in tegra.reason  # Jetson cubins, PTX only for sm90
    upgraded = gpu("sm87", "540.4.0", cuda="12.9")  # JetPack 6 with NVIDIA's CUDA 12.9 upgradable package
    orin = judge_build(
        FACTS,
        upgraded,
        cuda_window(FACTS, upgraded),
        "linux-aarch64",
        _build("cuda129_generic_h2_0", ("cuda-version >=12.9,<13", "arm-variant * tegra")),
    )
    assert orin.allowed


def test_a_newer_pytorch_channel_release_takes_the_newest_list_of_its_variant() -> None:
    target = gpu("sm90", "575.57.08")
    window = cuda_window(FACTS, target)
    newer = _build(
        "py3.12_cuda12.6_cudnn9_0",
        ("cuda-version >=12.6,<12.7",),
        "https://conda.anaconda.org/pytorch/linux-64",
        version="2.16.0",
    )
    verdict = judge_build(FACTS, target, window, "linux-64", newer)
    assert verdict.allowed and "is newer than lockgen's facts (2.14 cu126)" in verdict.inferred
    refused = judge_build(FACTS, target, window, "linux-64", newer, "refuse")
    assert not refused.allowed and refused.kind == "unknown-arch-list" and "LOCKGEN_FACTS" in refused.reason
    cu118 = _build(
        "py3.10_cuda11.8_cudnn8_0",
        ("pytorch-cuda 11.8.*",),
        "https://conda.anaconda.org/pytorch/linux-64",
        version="2.1.0",
    )
    p40 = gpu("sm61", "520.61.05")
    assert judge_build(FACTS, p40, cuda_window(FACTS, p40), "linux-64", cu118).allowed  # the channel's list has 6.1


def test_every_added_fact_keeps_a_source_that_says_how_sure_it_is() -> None:
    additions = json.loads((REPO / "tests" / "facts_additions.json").read_text())
    for wheel in additions["pytorch_pypi_wheels"]:
        assert wheel["sources"] and all("pypi.org" in s or s.startswith("toolkit:") for s in wheel["sources"]), wheel
    for updates in additions["cuda_toolkit_updates"].values():
        assert all("unverified" in " ".join(u["sources"]) for u in updates.values())
    assert FACTS.valid_as_of == additions["valid_as_of"] and FACTS.unverifiable
    for wheel in FACTS.pytorch_pypi_wheels:  # the PyPI cu13x wheels were read to carry no PTX
        if wheel.variant.startswith("cu13"):
            assert "+PTX" not in (wheel.arch_list or ""), wheel


@pytest.mark.slow
@pytest.mark.network
def test_the_newest_published_torch_that_fits_is_chosen(tmp_path: Path) -> None:
    """Online: `torch = ">=2.4"` for sm90 on R580 takes the newest release PyPI publishes whose CUDA the
    driver runs with minor-version compatibility, whether or not the facts list it."""
    with urllib.request.urlopen("https://pypi.org/pypi/torch/json", timeout=30) as reply:
        releases = [
            Version(v)
            for v, files in json.load(reply)["releases"].items()
            if files
            and not Version(v).is_prerelease
            and any("manylinux" in f["filename"] and "x86_64" in f["filename"] for f in files)
        ]
    stack = tmp_path / "stack.toml"
    stack.write_text(
        '[stack]\nname = "newest"\npython = "3.12"\n[pypi-dependencies]\ntorch = ">=2.4"\n[targets.h100]\narch = '
        '"sm90"\ndriver = "580.65.06"\ncuda-compat = "minor"\n'
    )
    done = run_cli("resolve", str(stack))
    assert done.returncode == 0, done.stderr
    lock = load_lock(tmp_path / "locks" / "h100.conda-lock.yml")
    torch = next(p.version for p in lock.package if p.name == "torch")
    notes = lock.metadata.custom_metadata.get("lockgen.newer-releases.linux-64", "")
    newest = max(releases)  # chosen, or a release newer than the facts that the lock says was refused and why
    assert Version(torch) == newest or (
        f"torch {newest} is newer than lockgen's facts" in notes and "refused" in notes
    ), (torch, newest, done.stderr)


@pytest.mark.slow
def test_facts_check_of_a_stack_names_the_channel_builds_the_facts_cannot_judge(tmp_path: Path) -> None:
    from tests.channel_factory import Pkg, build_channel

    channel = build_channel(
        tmp_path / "channel",
        [
            Pkg("cuda-version", "13.1", build="h0_3", subdir="noarch", constrains=("__cuda >=13",)),
            Pkg(
                "pytorch", "2.9.0", build="cuda129_h1_0", depends=("cuda-version >=12.9,<13",)
            ),  # the facts know its list
            Pkg(
                "pytorch", "2.9.0", build="cuda131_h1_0", depends=("cuda-version >=13.1,<14",)
            ),  # they know no 13.1 list
        ],
    )
    stack = tmp_path / "stack.toml"
    stack.write_text(
        f'[stack]\nname = "t"\nchannels = ["{channel.as_uri()}"]\n[dependencies]\npytorch = '
        '"*"\n[targets.h100]\narch = "sm90"\ndriver = "595.45.04"\n'
    )
    done = run_cli("facts", "check", "--stack", str(stack), "--json")
    assert done.returncode == 1, done.stderr
    builds = json.loads(done.stdout)["conda_builds"]
    assert [(b["build"], b["cuda"]) for b in builds] == [("pytorch 2.9.0 cuda131_h1_0", "13.1")]
    assert "no arch list known for CUDA 13.1" in builds[0]["decision"]


def test_jetson_thor_is_read_by_its_own_driver_numbering() -> None:
    """Thor's driver reports 580.00 (JetPack 7.0, CUDA 13.0): below 13.0 GA's dGPU floor, yet CUDA 13.0."""
    thor = gpu("sm110", "580.00")
    window = cuda_window(FACTS, thor)
    assert (window.low, window.high, window.native) == ("13.0", "13.0", "13.0") and "JetPack 7.0" in window.reason
    assert set(admitted(thor, "linux-aarch64")) == {"2.11", "2.12", "2.13", "2.14"}  # aarch64 cu130 lists carry 11.0
    assert admitted(thor, "linux-64") == ()  # the x86_64 lists have no sm_110
    stated = gpu("sm110", "575.00", cuda="13.0")  # a branch the facts lack: the CUDA the target states
    assert cuda_window(FACTS, stated).high == "13.0" and "the target states it" in cuda_window(FACTS, stated).reason
    with pytest.raises(TargetError) as caught:
        cuda_window(FACTS, gpu("sm110", "575.00"))
    assert "numbered on their own" in caught.value.hint and 'cuda = "13.0"' in caught.value.hint
    assert cuda_window(FACTS, gpu("sm90", "580.00")).high == "12.9"  # a dGPU's 580.00 stays Table 3's reading


def test_jetson_orin_is_read_by_its_own_driver_numbering() -> None:
    """JetPack 6.1/6.2 (Jetson Linux 36.4) reports driver 540.4.0 with CUDA 12.6; JetPack 5 has no nvidia-smi, its
    target states the Jetson Linux release (35.x: CUDA 11.4). Through Table 3, 540.4.0 would read as CUDA 12.2."""
    jp6 = cuda_window(FACTS, gpu("sm87", "540.4.0"))
    assert (jp6.low, jp6.high, jp6.native) == (
        "11.4",
        "12.6",
        "12.6",
    ) and "JetPack 6.1/6.2 (Jetson Linux 36.4)" in jp6.reason
    assert (
        cuda_window(FACTS, gpu("sm87", "35.4.1")).high == "11.4"
        and cuda_window(FACTS, gpu("sm72", "35.6.2")).high == "11.4"
    )
    assert admitted(gpu("sm87", "540.4.0"), "linux-aarch64") == ()  # PyPI's aarch64 CUDA builds are cu130 on
    for driver, arch in (
        ("540.3.0", "sm87"),
        ("540.4.0", "sm72"),
        ("36.4.3", "sm87"),
    ):  # JetPack 6.0; Xavier has no JP6
        with pytest.raises(TargetError) as caught:
            cuda_window(FACTS, gpu(arch, driver))
        assert (
            "know no branch of Jetson driver" in caught.value.message and "numbered on their own" in caught.value.hint
        )
        assert 'cuda = "' in caught.value.hint
    assert "540.4.x: CUDA 12.6" in caught.value.hint
    stated = cuda_window(FACTS, gpu("sm87", "540.3.0", cuda="12.2"))
    assert stated.high == "12.2" and "the target states it" in stated.reason
    for fact in (t for t in FACTS.tegra_drivers if "sm87" in t.archs):  # each branch cites an NVIDIA page
        assert any("nvidia.com/" in source for source in fact.sources), fact.branch
