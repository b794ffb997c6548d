"""The pure parts of certification, on outputs recorded from real H200 runs (envs/examples/h200-system):
envelopes, the causes they name, expectations from a lock, hardware refusals, topology parsing, comparison."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from lockgen.adapters.node.gpu_host import HostGpus
from lockgen.adapters.lock.lockfile_yaml import load_lock
from lockgen.core.certificate.certify import (
    clock_limits_seen,
    compare_figures,
    expectations_from_lock,
    gpus_not_visible,
    refuse_wrong_hardware,
    wrong_world_size,
)
from lockgen.core.certificate.envelopes import envelope_checks
from lockgen.errors import TargetError
from lockgen.model.certificate import Check, Figure, Figures
from tests.conftest import EXAMPLE_STACK, REPO
from verify.nvml import clock_limit_names

RECORDED = REPO / "envs" / "examples" / "h200-system"
FIXTURES = Path(__file__).parent / "fixtures"


def typed(figures: dict) -> Figures:
    """Figures as the certificate model reads them from a certificate's JSON."""
    return {
        group: {name: Figure.model_validate(e) for name, e in entries.items()} for group, entries in figures.items()
    }


def recorded(name: str) -> dict:
    return json.loads((RECORDED / f"{name}.cert.json").read_text())["certificate"]


def test_healthy_h200_figures_clear_every_floor() -> None:
    cert = recorded("h200x2-sm90")
    checks = envelope_checks("sm90", typed(cert["figures"]), cert["stack"], "nvlink", 2)
    assert {c.name for c in checks} >= {
        "gemm_bf16_floor",
        "gemm_tf32_floor",
        "amp_speedup_floor",
        "train_mfu_floor",
        "allreduce_busbw_floor",
    }
    assert all(c.passed for c in checks), [c.line() for c in checks if not c.passed]


def test_the_h200_certificates_of_issue_20_clear_the_new_floors() -> None:
    for name in ("h200-full", "h200-quick", "h200-lock-full", "degraded-cudnn-untuned"):
        cert = recorded(name)
        checks = {c.name: c for c in envelope_checks("sm90", typed(cert["figures"]), cert["stack"], "none", 1)}
        assert checks["conv_bf16_floor"].passed and checks["conv_fp16_floor"].passed, name
        assert cert["passed"] and cert["figures"]["graphs"]["bf16_replay_step_ms"]["value"] > 0
    assert recorded("h200-full")["figures"]["phases"]["total"]["value"] <= 25


def test_cudnn_off_fails_the_conv_floors_and_names_what_ran() -> None:
    cert = recorded("degraded-cudnn-off")
    failing = [c for c in envelope_checks("sm90", typed(cert["figures"]), cert["stack"], "none", 1) if not c.passed]
    assert [c.name for c in failing] == ["conv_bf16_floor", "conv_fp16_floor"]
    assert "cuDNN 9.19.0, cuDNN disabled (torch's own convolutions ran)" in failing[0].detail
    assert "most time in void at::native::col2im_kernel" in failing[0].detail


@pytest.mark.parametrize(
    "fault, check, cause",
    [
        ("sync", "capture", "operation failed due to a previous error during capture"),
        ("corrupt", "replay_matches_eager", "largest relative difference 4.1e-02 (limit 2e-02)"),
    ],
)
def test_a_broken_cuda_graph_fails_with_its_cause(fault: str, check: str, cause: str) -> None:
    cert = recorded(f"degraded-graph-{fault}")
    failing = {c["name"]: c["detail"] for c in cert["checks"] if not c["passed"]}
    assert list(failing) == [check] and cause in failing[check]


@pytest.mark.parametrize(
    "interconnect, latency, settings, passed",
    [
        ("nvlink", 18.0, {}, True),
        ("nvlink", 140.0, {"NCCL_PROTO": "Simple"}, False),
        ("pcie", 80.0, {}, True),
    ],
)
def test_small_allreduce_latency_has_a_ceiling_by_interconnect(
    interconnect: str, latency: float, settings: dict, passed: bool
) -> None:
    cert = recorded("h200x2-sm90")
    figures = {**cert["figures"], "allreduce_latency": {"8B": {"value": latency, "unit": "us"}}}
    checks = {
        c.name: c
        for c in envelope_checks("sm90", typed(figures), {**cert["stack"], "nccl_env": settings}, interconnect, 2)
    }
    assert checks["allreduce_latency_ceiling"].passed is passed
    if not passed:
        assert "NCCL_PROTO=Simple" in checks["allreduce_latency_ceiling"].detail
    one_gpu = envelope_checks("sm90", typed(figures), cert["stack"], "none", 1)
    assert "allreduce_latency_ceiling" not in {c.name for c in one_gpu}


def test_tf32_off_fails_and_names_the_cause() -> None:
    cert = recorded("degraded-tf32-off")
    failing = [c for c in envelope_checks("sm90", typed(cert["figures"]), cert["stack"], "none", 1) if not c.passed]
    assert [c.name for c in failing] == ["gemm_tf32_floor"]
    assert "TF32 is disabled (NVIDIA_TF32_OVERRIDE=0)" in failing[0].detail


def test_hidden_gpu_fails_and_names_the_cause() -> None:
    cert = recorded("degraded-hidden-gpu")
    failing = {c["name"]: c["detail"] for c in cert["checks"] if not c["passed"]}
    assert set(failing) == {"gpus_visible", "gpu_count"}
    assert "CUDA_VISIBLE_DEVICES='0'" in failing["gpus_visible"]


def test_the_hidden_gpu_rule_gives_the_check_the_device_run_recorded() -> None:
    """The rule on the single-GPU kernel's stack, against the check an H200 run with CUDA_VISIBLE_DEVICES=0 wrote."""
    hidden = recorded("degraded-hidden-gpu")
    found = gpus_not_visible("sm90", hidden["hardware"]["gpu_count"], hidden["stack"])
    assert found == Check.model_validate(next(c for c in hidden["checks"] if c["name"] == "gpus_visible"))
    healthy = recorded("h200x2-sm90")["stack"]
    assert gpus_not_visible("sm90", 2, healthy) is None  # both seen: the multi-GPU checks run
    assert gpus_not_visible("sm90", 1, hidden["stack"]) is None and gpus_not_visible("cpu", 2, {}) is None
    unset = gpus_not_visible("sm90", 4, {**healthy, "cuda_visible_devices": None})
    assert (
        unset is not None
        and unset.detail.startswith("the environment sees 2 of the 4 GPUs")
        and "CUDA_VISIBLE" not in unset.detail
    )


def test_the_world_size_rule_holds_the_ranks_to_gpus_times_nodes() -> None:
    run = recorded("two-nodes-node0")["distributed"]  # two nodes of one GPU each, met at a rendezvous
    assert wrong_world_size(run["world_size"], 1, run["nodes"], True) is None
    short = wrong_world_size(run["world_size"], 2, run["nodes"], True)
    assert short is not None and not short.passed and short.detail == "2 ranks ran, 4 expected (2 nodes of 2)"
    one_node = wrong_world_size(1, 2, 1, False)
    assert one_node is not None and one_node.detail == "1 ranks ran, 2 expected"


def test_a_slow_allreduce_fails_its_floor() -> None:
    cert = recorded("h200x2-sm90")
    figures = json.loads(json.dumps(cert["figures"]))
    figures["allreduce"]["1024MiB"]["value"] = 40.0
    failing = [c for c in envelope_checks("sm90", typed(figures), cert["stack"], "nvlink", 2) if not c.passed]
    assert [c.name for c in failing] == ["allreduce_busbw_floor"] and "40 GB/s" in failing[0].detail


def test_a_failed_floor_names_the_clock_limits_nvml_reported() -> None:
    cert = recorded("h200x2-sm90")
    figures = json.loads(json.dumps(cert["figures"]))
    figures["gemm"]["bf16"]["value"] = 300.0
    telemetry = {"single": {"gpus": {"0": {"clock_limits_seen": ["software power cap"]}, "1": {}}}, "distributed": {}}
    checks = envelope_checks("sm90", typed(figures), cert["stack"], "nvlink", 2, clock_limits_seen(telemetry))
    failing = [c for c in checks if not c.passed]
    assert [c.name for c in failing] == ["gemm_bf16_floor"]
    assert failing[0].detail.endswith("held down during the run by: software power cap")
    assert all("held down" not in c.detail for c in checks if c.passed)


@pytest.mark.parametrize("issue_ms, host_bound", [(95.0, True), (40.0, False)])
def test_a_failed_training_floor_names_a_host_bound_step(issue_ms: float, host_bound: bool) -> None:
    cert = recorded("h200x2-sm90")
    figures = json.loads(json.dumps(cert["figures"]))
    figures["training"]["bf16_model_tflops"]["value"] = 60.0  # as a 100 ms step would give
    figures["training"]["bf16_step_ms"].update(value=100.0, host_issue_ms=issue_ms)
    checks = envelope_checks("sm90", typed(figures), cert["stack"], "nvlink", 2)
    failing = [c for c in checks if not c.passed]
    assert [c.name for c in failing] == ["train_mfu_floor"]
    assert ("host-bound" in failing[0].detail) is host_bound
    assert all("host-bound" not in c.detail for c in checks if c.passed)


@pytest.mark.parametrize("replay_ms, passed", [(20.4, True), (90.0, False)])
def test_a_host_bound_step_is_judged_by_the_same_step_replayed_as_a_cuda_graph(replay_ms: float, passed: bool) -> None:
    """The eager bf16 step took 100 ms, 95 of them the host's to issue it: the training floors judge the same step
    replayed as a CUDA graph (no host in the loop) and say so; a replay as slow as a GPU stack without working bf16
    still fails both, and no longer blames the host."""
    cert = recorded("h200x2-sm90")
    figures = json.loads(json.dumps(cert["figures"]))
    fp32_ms = figures["training"]["fp32_step_ms"]["value"]
    figures["training"]["bf16_step_ms"].update(value=100.0, host_issue_ms=95.0)
    figures["training"]["speedup_bf16_over_fp32"]["value"] = fp32_ms / 100.0
    figures["training"]["bf16_model_tflops"]["value"] = 60.0  # as a 100 ms step gives
    figures["graphs"] = {"bf16_replay_step_ms": {"value": replay_ms, "unit": "ms"}}
    checks = {c.name: c for c in envelope_checks("sm90", typed(figures), cert["stack"], "nvlink", 2)}
    speedup, mfu = checks["amp_speedup_floor"], checks["train_mfu_floor"]
    assert (speedup.passed, mfu.passed) == (passed, passed)
    assert speedup.value == pytest.approx(fp32_ms / replay_ms)
    assert mfu.value == pytest.approx(60.0 * 100.0 / replay_ms / 989.4)  # the model FLOPs of the replayed step
    for check in (speedup, mfu):
        assert f"replayed as a CUDA graph, {replay_ms:.1f} ms: the eager step, 100.0 ms, was host-bound" in check.detail
        assert "re-run on an idle host" not in check.detail
    for no_faster_replay in (None, 150.0):  # none (capture failed, or a replay that computed something else), slower
        figures["graphs"]["bf16_replay_step_ms"]["value"] = no_faster_replay  # the eager step judged, as before
        eager = {c.name: c for c in envelope_checks("sm90", typed(figures), cert["stack"], "nvlink", 2)}[
            "amp_speedup_floor"
        ]
        assert not eager.passed and "re-run on an idle host" in eager.detail and "replayed" not in eager.detail


def test_the_h200_run_that_failed_on_a_host_bound_step_passes_judged_by_its_replay() -> None:
    """The lent H200's first full run of session 33 (committed, signed): signed with `amp_speedup_floor` failed at
    2.95x, its eager bf16 step host-bound; its own figures judged now give the replayed step's 6.5x, and no other
    check it was signed with changes."""
    path = "envs/examples/numerics-fingerprint/budget/session33-h200-2026-12-07/call1/new-full1.cert.json"
    body = json.loads((REPO / path).read_text())["certificate"]
    signed = {(c["category"], c["name"]): c["passed"] for c in body["checks"] if c["category"] == "performance"}
    assert signed[("performance", "amp_speedup_floor")] is False
    judged = envelope_checks("sm90", typed(body["figures"]), body["stack"], "none", 1)
    speedup = next(c for c in judged if c.name == "amp_speedup_floor")
    assert speedup.passed and speedup.value == pytest.approx(6.5, abs=0.1)
    assert "replayed as a CUDA graph, 20.4 ms: the eager step, 45.1 ms, was host-bound" in speedup.detail
    assert {(c.category, c.name): c.passed for c in judged if c.name != "amp_speedup_floor"} == {
        key: passed
        for key, passed in signed.items()
        if key[1] != "amp_speedup_floor" and key[1] in {c.name for c in judged}
    }


def test_clock_limit_bits_are_named_and_idle_is_not_a_limit() -> None:
    assert clock_limit_names(0x1) == []
    assert clock_limit_names(0x4 | 0x40 | 0x1) == ["software power cap", "hardware thermal slowdown"]


def test_no_envelope_for_cpu() -> None:
    assert envelope_checks("cpu", typed({"gemm": {"fp32": {"value": 0.1, "unit": "TFLOP/s"}}}), {}, "none", 1) == []


def test_expectations_from_the_example_locks() -> None:
    h100 = expectations_from_lock(load_lock(EXAMPLE_STACK.parent / "locks" / "h100.conda-lock.yml"), "linux-64")
    assert h100["torch"] == "2.8.0" and h100["cuda"] == "12.9" and h100["driver_min"] == "575.51.03"
    assert "cudnn" in h100 and "nccl" in h100
    cpu = expectations_from_lock(load_lock(EXAMPLE_STACK.parent / "locks" / "cpu.conda-lock.yml"), "linux-64")
    assert "driver_min" not in cpu and cpu["torch"] == "2.12.0"


def test_wrong_hardware_is_refused_before_running() -> None:
    with pytest.raises(TargetError, match="not sm90"):
        refuse_wrong_hardware("sm90", ("NVIDIA A100-SXM4-80GB",), ("8.0",), "550.54.15", None)
    with pytest.raises(TargetError, match=re.escape("older than 575.51.03")):
        refuse_wrong_hardware("sm90", ("NVIDIA H200",), ("9.0",), "570.86.10", "575.51.03")
    with pytest.raises(TargetError, match="no NVIDIA GPU"):
        refuse_wrong_hardware("sm90", (), (), None, None)
    refuse_wrong_hardware("sm90", ("NVIDIA H200", "NVIDIA H200"), ("9.0", "9.0"), "580.159.04", "575.51.03")


def test_interconnect_from_recorded_topology() -> None:
    topology = (FIXTURES / "h200x2-topo.txt").read_text()
    import re

    clean = re.sub(r"\x1b\[[0-9;]*m", "", topology)
    assert HostGpus(("NVIDIA H200",) * 2, ("9.0",) * 2, "580.159.04", clean).interconnect == "nvlink"
    pcie = clean.replace("NV18", "SYS")
    assert HostGpus(("NVIDIA H200",) * 2, ("9.0",) * 2, "580.159.04", pcie).interconnect == "pcie"


def test_compare_flags_regressions_beyond_noise() -> None:
    old = recorded("h200x2-sm90")["figures"]
    new = json.loads(json.dumps(old))
    new["gemm"]["bf16"]["value"] *= 0.8
    new["training"]["bf16_step_ms"]["value"] *= 1.02
    rows = {r.name: r for r in compare_figures(old, new, 0.05)}
    assert rows["gemm/bf16"].regression and round(rows["gemm/bf16"].change, 2) == -0.2
    assert not rows["training/bf16_step_ms"].regression and rows["training/bf16_step_ms"].change < 0
    assert not any(r.regression for r in compare_figures(old, old, 0.05))
