"""`lockgen explain`: every torch candidate a target was judged against, with its verdict and the deciding rule,
newest first. Offline: a loopback PEP 691 index stands in for PyPI, serving a small torch wheel for every release
the facts know (cp311 and, from 2.2, cp312; manylinux2014 before 2.6 and manylinux_2_28 from it, as PyPI's Linux
wheels moved), read once per explain as resolve reads it; its releases are judged by the arch rules (the driver
floors they cite are NVIDIA's Table 3 GA drivers, 12.6 GA: 560.28.03) and by what the page shows (Python, glibc,
upload time) and the stack's pin."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lockgen.adapters.lock.lockfile_yaml import load_lock
from lockgen.api.explain import explain
from lockgen.core.gpu.facts import load_facts
from lockgen.core.gpu.versions import as_tuple
from tests.conftest import REPO, run_cli
from tests.range_server import RangeServer, Site
from tests.test_newer_releases import publish
from tests.wheel_index import Wheel

EXAMPLE = REPO / "envs" / "examples" / "torch-pypi" / "stack.toml"
MACHINE = {"linux-64": "x86_64", "linux-aarch64": "aarch64"}


def _torch_wheels() -> list[Wheel]:
    """torch wheels requiring their CUDA as PyPI's do (the runtime wheel before CUDA 13, `cuda-toolkit` from it)."""
    wheels, cuda = [], set()
    for fact in load_facts().pytorch_pypi_wheels:
        floor = "manylinux_2_28" if as_tuple(fact.torch) >= (2, 6) else "manylinux2014"
        major, minor = (fact.variant[2:-1], fact.variant[-1]) if fact.variant != "cpu" else ("", "")
        runtime = (
            ()
            if not major
            else (f"cuda-toolkit[cudart]=={major}.{minor}.0",)
            if major == "13"
            else (f"nvidia-cuda-runtime-cu{major}=={major}.{minor}.0",)
        )
        cuda |= (
            {(("cuda-toolkit" if major == "13" else f"nvidia-cuda-runtime-cu{major}"), f"{major}.{minor}.0")}
            if major
            else set()
        )
        for python in ("311", "312") if as_tuple(fact.torch) >= (2, 2) else ("311",):
            wheels.append(
                Wheel(
                    "torch",
                    f"{fact.torch}.0",
                    tag=f"cp{python}-cp{python}-{floor}_{MACHINE[fact.platform]}",
                    requires=runtime,
                )
            )
    return wheels + [Wheel(name, version) for name, version in sorted(cuda)]


@pytest.fixture
def pypi(tmp_path: Path):
    """(the stand-in PyPI's URL, its site): torch's page lists every release the facts know."""
    site = Site()
    publish(site, tmp_path / "pypi-wheels", _torch_wheels())
    server = RangeServer(site)
    yield server.url, site
    server.stop()


def uploaded(site: Site, release: str, moment: str) -> None:
    """Moves the upload time of every wheel of `release` on the stand-in's torch page."""
    page = json.loads(site.files["/simple/torch/"][0])
    for entry in page["files"]:
        if entry["filename"].startswith(f"torch-{release}.0-"):
            entry["upload-time"] = moment
    site.files["/simple/torch/"] = (json.dumps(page).encode(), "application/vnd.pypi.simple.v1+json")


def example(folder: Path, url: str) -> Path:
    """The torch-pypi example, pointed at the stand-in PyPI."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "stack.toml"
    path.write_text(EXAMPLE.read_text().replace("[pypi-options]\n", f'[pypi-options]\nindex-url = "{url}/simple"\n'))
    return path


def stack(folder: Path, deps: str, target: str, url: str, python: str = "3.11", options: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "stack.toml"
    path.write_text(
        f'[stack]\nname = "e"\npython = "{python}"\nplatforms = '
        f'["linux-64"]\n[pypi-dependencies]\n{deps}\n[pypi-options]\nindex-url = '
        f'"{url}/simple"\n{options}\n{target}\n'
    )
    return path


def by_release(report: dict, release: str, platform: str = "linux-64") -> dict:
    return next(c for c in report["candidates"] if c["release"] == release and c["platform"] == platform)


def test_explain_names_why_torch_2_7_is_out_for_sm80_on_550(tmp_path: Path, pypi) -> None:
    url, site = pypi
    path = example(tmp_path, url)
    done = run_cli("explain", str(path), "--target", "a100", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    out = by_release(report, "2.7")
    assert (out["admitted"], out["rule"], out["variant"], out["source"]) == (False, "driver-floor", "cu126", "pypi.org")
    assert "needs driver >= 560.28.03" in out["reason"] and "550.54.15" in out["reason"]
    assert by_release(report, "2.6")["admitted"] and by_release(report, "2.6")["rule"] == "native-kernels"
    assert report["newest_admitted"] == {"linux-64": "torch 2.6 (cu124, pypi.org)"}
    releases = [tuple(int(n) for n in c["release"].split(".")) for c in report["candidates"]]
    assert (
        releases == sorted(releases, reverse=True) and len(releases) >= 12
    )  # every release the index serves, newest first
    assert [p for p, _, _ in site.log].count("/simple/torch/") == 1  # the page is read once
    text = run_cli("explain", str(path), "--target", "a100")
    assert "refused  torch 2.7 cu126 pypi.org linux-64  [driver-floor]" in text.stdout


def test_each_rule_is_named_arch_list_pin_and_no_sm70_code(tmp_path: Path, pypi) -> None:
    url, _ = pypi
    pascal = explain(
        stack(tmp_path / "p", 'torch = "*"', '[targets.p100]\narch = "sm60"\ndriver = "580.95.05"', url), "p100"
    )
    assert by_release(pascal, "2.8")["rule"] == "no-kernels" and "7.0;7.5" in by_release(pascal, "2.8")["reason"]
    pinned = explain(
        stack(tmp_path / "h", 'torch = "==2.5.*"', '[targets.h100]\narch = "sm90"\ndriver = "580.95.05"', url), "h100"
    )
    assert by_release(pinned, "2.6")["rule"] == "pin" and by_release(pinned, "2.5")["admitted"]
    assert by_release(pinned, "2.15")["rule"] == "driver-floor"  # the arch rules decide before the pin
    volta = explain(
        stack(tmp_path / "v", 'torch = "*"', '[targets.v100]\narch = "sm70"\ndriver = "580.95.05"', url), "v100"
    )
    cu130 = by_release(volta, "2.11")  # R580 runs CUDA 13.0: the driver is not why, the missing sm_70 code is
    assert (
        cu130["rule"] == "no-kernels"
        and "no sm_70 code" in cu130["reason"]
        and "CUDA 12.9 is the last that does" in cu130["reason"]
    )
    assert volta["newest_admitted"] == {"linux-64": "torch 2.10 (cu128, pypi.org)"}


@pytest.mark.slow
def test_a_cpu_target_is_explained_with_what_its_cpu_index_serves_as_resolve_takes_it(tmp_path: Path, pypi) -> None:
    """explain said "none" where resolve took 2.13.0+cpu from the CPU index, and exited 0 when that index could
    not be read: it reads the CPU index as resolve's uv does, so the two agree, and an unreadable one fails both."""
    url, _ = pypi
    site = Site()
    publish(
        site,
        tmp_path / "cpu-wheels",
        [Wheel("torch", f"{v}+cpu", tag="cp311-cp311-manylinux_2_28_x86_64") for v in ("2.12.0", "2.13.0")],
    )
    server = RangeServer(site)
    path = stack(
        tmp_path / "c",
        'torch = "*"',
        '[targets.cpu]\narch = "cpu"',
        url,
        options=f'torch-indexes = {{ cpu = "{server.url}/simple" }}',
    )
    try:
        cpu = explain(path, "cpu")
        assert (
            cpu["newest_admitted"] == {"linux-64": f"torch 2.13 (cpu, {server.url}/simple)"}
            and cpu["cuda_window"] is None
        )
        assert {c["rule"] for c in cpu["candidates"]} == {"cpu-target", "cpu-index"}
        done = run_cli("resolve", str(path))
        assert done.returncode == 0, done.stderr
        assert {p.name: p.version for p in load_lock(tmp_path / "c" / "locks" / "cpu.conda-lock.yml").package}[
            "torch"
        ] == "2.13.0+cpu"
    finally:
        server.stop()
    for command in ("explain", "resolve"):
        done = run_cli(command, str(path), *(("--target", "cpu") if command == "explain" else ()))
        assert done.returncode == 1 and "error: " in done.stderr and "Traceback" not in done.stderr, (
            command,
            done.stderr,
        )


A100 = '[targets.a100]\narch = "sm80"\ndriver = "550.54.15"\n'


@pytest.mark.parametrize(
    "python, target, cut, rule, said, newest",
    [
        ("3.12", A100, "", "python", "no 2.1.0 wheel for Python 3.12 on the platform", "2.6"),  # 2.1 on: checked at 2.1
        ("3.11", A100 + 'glibc = "2.17"\n', "", "glibc", "needs glibc >= 2.28, the target states 2.17", "2.5"),
        (
            "3.11",
            A100,
            'exclude-newer = "2026-03-01"',
            "exclude-newer",
            "no 2.6.0 wheel uploaded before the cut-off (2026-03-01;",
            "2.5",
        ),
    ],
)
def test_pypi_candidates_go_through_python_glibc_and_exclude_newer(
    tmp_path: Path, pypi, python: str, target: str, cut: str, rule: str, said: str, newest: str
) -> None:
    """PyPI's own builds are judged by what its page shows, as a variant index's are: the release the rule keeps out
    is named with it, and the newest admitted one is what resolve takes, its decision line naming the rule."""
    url, site = pypi
    uploaded(site, "2.6", "2026-04-01T00:00:00Z")
    path = stack(tmp_path, 'torch = ">=2.1"', target, url, python, cut)
    report = explain(path, "a100")
    checked = by_release(report, "2.1" if rule == "python" else "2.6")
    assert (checked["admitted"], checked["rule"], checked["source"]) == (False, rule, "pypi.org") and said in checked[
        "reason"
    ]
    assert report["newest_admitted"] == {"linux-64": f"torch {newest} (cu124, pypi.org)"}
    if rule == "python":
        assert by_release(report, "2.7")["rule"] == "driver-floor"  # a wheel for 3.12 there: the arch rules decide
        return
    done = run_cli("resolve", str(path))
    assert done.returncode == 0, done.stderr
    lock = load_lock(tmp_path / "locks" / "a100.conda-lock.yml")
    assert next(p.version for p in lock.package if p.name == "torch") == f"{newest}.0"
    line = lock.metadata.custom_metadata["lockgen.decision.linux-64"]
    assert line.startswith(f"torch {newest}.0; 2.6 passed over by {rule}: ") and said in line
    assert f"a100 on linux-64: {line}" in done.stderr


def test_no_pypi_release_the_rules_admit_is_one_error_naming_why(tmp_path: Path, pypi) -> None:
    url, _ = pypi
    pinned = stack(tmp_path / "p", 'torch = "==2.7.*"', A100, url)
    done = run_cli("resolve", str(pinned))
    assert (
        done.returncode == 1
        and "error: target `a100`: no torch release on PyPI fits sm80 with driver 550.54.15" in done.stderr
    )
    assert (
        "torch 2.7 on PyPI (linux-64): built with CUDA 12.6 (needs driver >= 560.28.03)" in done.stderr
    )  # the one asked for
    assert (
        'add `torch-variants = ["cu118"]`' in done.stderr and "raise `driver` to >= 560.28.03" in done.stderr
    )  # steps that work, for 2.7
    assert "Traceback" not in done.stderr and not (tmp_path / "p" / "locks").exists()
    future = stack(tmp_path / "f", 'torch = "*"', A100, url, "3.14")
    done = run_cli("resolve", str(future))
    assert done.returncode == 1 and "no 2.15.0 wheel for Python 3.14 on the platform" in done.stderr


def test_explain_reads_pypis_page_once_for_every_platform_and_names_an_unreadable_one(tmp_path: Path, pypi) -> None:
    url, site = pypi
    both = stack(
        tmp_path / "b",
        'torch = "*"',
        '[targets.gh]\narch = "sm90"\ndriver = "580.65.06"\nplatforms = ["linux-64", "linux-aarch64"]',
        url,
    )
    report = explain(both, "gh")
    assert report["newest_admitted"] == {
        "linux-64": "torch 2.14 (cu130, pypi.org)",
        "linux-aarch64": "torch 2.14 (cu130, pypi.org)",
    }
    assert by_release(report, "2.9", "linux-aarch64")["rule"] == "cpu-build"
    assert [p for p, _, _ in site.log].count("/simple/torch/") == 1
    site.files["/simple/torch/"] = (b"{not json", "application/vnd.pypi.simple.v1+json")
    done = run_cli("explain", str(both), "--target", "gh")
    assert done.returncode == 1 and f"its torch source PyPI @ {url}/simple cannot be read" in done.stderr
    assert "hint: make it reachable, point [pypi-options] index-url at a mirror" in done.stderr


def test_explain_of_a_missing_target_or_an_unreachable_cuda_is_one_error(tmp_path: Path, pypi) -> None:
    url, _ = pypi
    done = run_cli("explain", str(EXAMPLE), "--target", "nope")
    assert (
        done.returncode == 1 and "error: no target `nope`" in done.stderr and "hint: its targets: v100" in done.stderr
    )
    assert "Traceback" not in done.stderr
    old = stack(tmp_path, 'torch = "*"', '[targets.b200]\narch = "sm100"\ndriver = "550.54.15"', url)
    done = run_cli("explain", str(old), "--target", "b200")
    assert done.returncode == 1 and "runs CUDA <= 12.4 but sm100 needs CUDA >= 12.8" in done.stderr
    assert "hint: CUDA 12.8 needs driver >= 570.26" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    ("target", "step"),
    [
        (
            '[targets.orin]\narch = "sm87"\ndriver = "540.4.0"\nplatforms = ["linux-aarch64"]',
            r"state it \(`(cuda = \"13\.0\")` in the target\)",
        ),
        (
            '[targets.gh200]\narch = "sm90"\ndriver = "570.86.10"\nplatforms = ["linux-aarch64"]',
            r"raise `driver` to >= (580\.65\.06) \(CUDA 13\.0\)",
        ),
        ('[targets.a100]\narch = "sm80"\ndriver = "470.256.02"', r"raise `driver` to >= (530\.30\.02) \(CUDA 12\.1\)"),
    ],
)
def test_each_hint_names_a_step_that_works_for_that_target(tmp_path: Path, pypi, target: str, step: str) -> None:
    """Orin on JetPack 6, GH200 on R570, an A100 on R470: the hint names a step that resolves when taken (a Jetson's
    driver has no floors to raise to, and PyTorch's SBSA builds do not run on it; 'cuda-compat = "minor"' gives
    GH200 no PyPI build), where it said "raise the driver or set cuda-compat" and "add the PyTorch index"."""
    import re

    url, _ = pypi
    path = stack(tmp_path, 'torch = ">=2.4"', target, url)
    done = run_cli("resolve", str(path))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    found = re.search(step, done.stderr)
    assert found, done.stderr
    taken = found.group(1)
    text = path.read_text()
    path.write_text(
        text + taken + "\n" if taken.startswith("cuda") else re.sub(r'driver = "[^"]+"', f'driver = "{taken}"', text)
    )
    done = run_cli("resolve", str(path))
    assert done.returncode == 0, done.stderr
