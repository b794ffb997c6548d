"""`lockgen explain`: every torch candidate a target was judged against, with its verdict and the deciding rule,
newest first. Offline: a pure-PyPI stack's candidates are the facts' PyPI builds; the driver floors they cite are
NVIDIA's Table 3 GA drivers (12.6 GA: 560.28.03)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lockgen.api.explain import explain
from tests.conftest import REPO, run_cli

EXAMPLE = REPO / "envs" / "examples" / "torch-pypi" / "stack.toml"


def stack(folder: Path, deps: str, target: str) -> Path:
    path = folder / "stack.toml"
    path.write_text(f'[stack]\nname = "e"\npython = "3.11"\nplatforms = ["linux-64"]\n[pypi-dependencies]\n{deps}\n{target}\n')
    return path


def by_release(report: dict, release: str, platform: str = "linux-64") -> dict:
    return next(c for c in report["candidates"] if c["release"] == release and c["platform"] == platform)


@pytest.mark.slow
def test_explain_names_why_torch_2_7_is_out_for_sm80_on_550() -> None:
    done = run_cli("explain", str(EXAMPLE), "--target", "a100", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    out = by_release(report, "2.7")
    assert (out["admitted"], out["rule"], out["variant"], out["source"]) == (False, "driver-floor", "cu126", "pypi.org")
    assert "needs driver >= 560.28.03" in out["reason"] and "550.54.15" in out["reason"]
    assert by_release(report, "2.6")["admitted"] and by_release(report, "2.6")["rule"] == "native-kernels"
    assert report["newest_admitted"] == {"linux-64": "torch 2.6 (cu124, pypi.org)"}
    releases = [tuple(int(n) for n in c["release"].split(".")) for c in report["candidates"]]
    assert releases == sorted(releases, reverse=True) and len(releases) >= 12  # every release the facts know, newest first
    text = run_cli("explain", str(EXAMPLE), "--target", "a100")
    assert "refused  torch 2.7 cu126 pypi.org linux-64  [driver-floor]" in text.stdout


def test_each_rule_is_named_arch_list_pin_and_cpu_target(tmp_path: Path) -> None:
    pascal = explain(stack(tmp_path, 'torch = "*"', '[targets.p100]\narch = "sm60"\ndriver = "580.95.05"'), "p100")
    assert by_release(pascal, "2.8")["rule"] == "no-kernels" and "7.0;7.5" in by_release(pascal, "2.8")["reason"]
    pinned = explain(stack(tmp_path, 'torch = "==2.5.*"', '[targets.h100]\narch = "sm90"\ndriver = "580.95.05"'), "h100")
    assert by_release(pinned, "2.6")["rule"] == "pin" and by_release(pinned, "2.5")["admitted"]
    assert by_release(pinned, "2.15")["rule"] == "driver-floor"  # the arch rules decide before the pin
    cpu = explain(stack(tmp_path, 'torch = "*"', '[targets.cpu]\narch = "cpu"'), "cpu")
    assert {c["rule"] for c in cpu["candidates"]} == {"cpu-target"} and cpu["cuda_window"] is None
    assert "download.pytorch.org/whl/cpu" in cpu["candidates"][0]["reason"]


@pytest.mark.slow
def test_explain_of_a_missing_target_or_an_unreachable_cuda_is_one_error(tmp_path: Path) -> None:
    done = run_cli("explain", str(EXAMPLE), "--target", "nope")
    assert done.returncode == 1 and "error: no target `nope`" in done.stderr and "hint: its targets: v100" in done.stderr
    assert "Traceback" not in done.stderr
    old = stack(tmp_path, 'torch = "*"', '[targets.b200]\narch = "sm100"\ndriver = "550.54.15"')
    done = run_cli("explain", str(old), "--target", "b200")
    assert done.returncode == 1 and "runs CUDA <= 12.4 but sm100 needs CUDA >= 12.8" in done.stderr
    assert "hint: CUDA 12.8 needs driver >= 570.26" in done.stderr and "Traceback" not in done.stderr
