"""The kernel's own judgements (verify/ runs inside the environment): stack checks on stacks it cannot
be run on here (a CPU-only torch on a GPU target, a hidden GPU, PTX-only kernels), and version matching."""

from __future__ import annotations

import pytest

from verify.expect import expectations, stack_checks
from verify.results import Results
from verify.stack import coverage

GPU_STACK = {
    "torch": "2.11.0+cu130",
    "cuda": "13.0",
    "cudnn": "9.19.0",
    "nccl": "2.28.9",
    "cuda_available": True,
    "arch_list": ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"],
    "arch_coverage": "sass",
    "devices": [{"name": "NVIDIA H200", "compute_capability": "9.0"}] * 2,
    "driver": "580.159.04",
    "host_gpu_count": 2,
    "cuda_visible_devices": None,
    "platform": "linux-x86_64",
}


def failures(results: Results) -> dict[str, str]:
    return {c["name"]: c["detail"] for c in results.checks_json() if not c["passed"]}


def test_healthy_stack_passes() -> None:
    results = Results()
    assert stack_checks(results, "sm90", GPU_STACK, False, None)
    expectations(
        results,
        GPU_STACK,
        {
            "torch": "2.11.0",
            "cuda": "13.0",
            "cudnn": "9.19.0.56",
            "nccl": "2.28.9.1",
            "driver_min": "580.65.06",
            "gpu_count": 2,
        },
    )
    assert failures(results) == {}


def test_cpu_only_torch_on_a_gpu_target_names_the_cause() -> None:
    results = Results()
    cpu_torch = {
        **GPU_STACK,
        "torch": "2.13.0+cpu",
        "cuda": None,
        "cuda_available": False,
        "devices": [],
        "arch_list": [],
    }
    assert not stack_checks(results, "sm90", cpu_torch, False, None)
    assert "CPU-only build" in failures(results)["cuda_build"]


def test_hidden_gpu_and_wrong_versions_name_the_cause() -> None:
    results = Results()
    hidden = {**GPU_STACK, "devices": GPU_STACK["devices"][:1], "cuda_visible_devices": "0"}
    stack_checks(results, "sm90", hidden, False, None)
    expectations(results, hidden, {"torch": "2.12.0", "driver_min": "590.44.01"})
    failed = failures(results)
    assert "CUDA_VISIBLE_DEVICES='0'" in failed["all_gpus_visible"]
    assert "expected 2.12.0, found 2.11.0+cu130" in failed["torch_version"]
    assert "needs >= 590.44.01" in failed["driver_floor"]


def test_ptx_only_coverage() -> None:
    assert coverage(["sm_80", "sm_90", "compute_90"], (10, 0)) == "ptx"
    assert coverage(["sm_80", "sm_90"], (10, 0)) == "none"
    assert coverage(["sm_90a"], (9, 0)) == "sass" and coverage(["sm_90a"], (9, 1)) == "none"
    results = Results()
    ptx = {**GPU_STACK, "arch_coverage": "ptx", "devices": [{"name": "B200", "compute_capability": "10.0"}] * 2}
    stack_checks(results, "sm100", ptx, False, None)
    assert "PTX JIT only" in failures(results)["native_kernels"]


class _FakeNvml:
    available, error = True, ""

    def sample(self, index: int) -> dict:
        return {
            "util": 100.0,
            "power_w": 690.0,
            "temp_c": 60.0,
            "sm_mhz": 1755.0,
            "mem_mhz": 3201.0,
            "clock_limits": 4.0,
        }


def test_telemetry_of_one_phase_and_the_nvml_index(monkeypatch) -> None:
    import time

    from verify.nvml import Telemetry, nvml_index

    with Telemetry(_FakeNvml(), [0], interval_s=0.01) as telemetry:
        time.sleep(0.05)
        started = time.monotonic()
        time.sleep(0.05)
        ended = time.monotonic()
    phase = telemetry.during(0, started, ended)
    assert phase is not None and phase.sm_mhz is not None
    assert phase.sm_mhz.min == 1755.0 and phase.clock_limits_seen == ("software power cap",)
    assert telemetry.during(0, ended + 10, ended + 20) is None  # no samples: no `gpu` on the figure
    assert telemetry.summary()["gpus"]["0"]["power_w"]["max"] == 690.0
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")
    assert nvml_index(0) == 1 and nvml_index(1) == 0
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert nvml_index(0) == 0


def test_a_ddp_mismatch_names_the_tensors_that_differ() -> None:
    """The DDP check's detail says which parameter tensors differ between ranks and by how much, so a FAIL
    (seen on CPU stand-in nodes under load) can be told from a real divergence."""
    import torch

    from verify.dist import _where_they_differ

    named = [("wte.weight", torch.zeros(3)), ("head.bias", torch.zeros(2))]
    assert (
        _where_they_differ(named, torch.tensor([0.0, 0.0, 0.0, 2e-7, 0.0]))
        == "1 of 2 tensors: head.bias: 1 values, up to 2e-07"
    )


@pytest.mark.slow
def test_the_quick_optimizer_is_torch_optims_adamw_without_dynamo() -> None:
    """--quick trains with AdamW in torch ops (verify.adamw): the same update as torch.optim.AdamW, and a
    process that uses it never imports torch._dynamo (2.7 s of a quick run on an H200)."""
    import subprocess
    import sys

    import torch

    from verify.adamw import TorchOpsAdamW

    torch.manual_seed(0)
    reference, ours = torch.nn.Linear(16, 8), torch.nn.Linear(16, 8)
    ours.load_state_dict(reference.state_dict())
    optimizers = (torch.optim.AdamW(reference.parameters(), lr=3e-3), TorchOpsAdamW(ours.parameters(), lr=3e-3))
    inputs = torch.randn(32, 16)
    for _ in range(25):
        for model, optimizer in zip((reference, ours), optimizers):
            optimizer.zero_grad()
            (model(inputs) ** 2).sum().backward()
            optimizer.step()
    assert max((a - b).abs().max().item() for a, b in zip(reference.parameters(), ours.parameters())) < 1e-5
    probe = (
        "import sys, torch; from verify.adamw import TorchOpsAdamW; m = torch.nn.Linear(4, 2); "
        "o = TorchOpsAdamW(m.parameters(), lr=1e-3); m(torch.ones(1, 4)).sum().backward(); o.step(); "
        "print('torch._dynamo' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "False", done.stderr


def test_the_training_model_built_on_a_thread_has_the_bits_of_one_built_alone() -> None:
    """verify.run initialises the training model on a thread while the correctness checks run (0.7-0.8 s of CPU
    for the full model on an H100 host): the checks draw nothing from torch's global generator, which that build
    seeds and draws from, so the model has the same bits as one built alone, and the fingerprint after it too."""
    import threading

    import torch

    from verify import train
    from verify.correctness import attention, convolution, gemm

    config = train.GptConfig(vocab=512, width=64, layers=2, heads=4, sequence=32, batch=4)
    train.initial_model(config, 5)
    alone = train._INITIAL.pop((config, 5))
    torch.manual_seed(123)
    before = torch.get_rng_state()
    results, device = Results(), torch.device("cpu")
    build = threading.Thread(target=train.initial_model, args=(config, 5))
    build.start()
    gemm(results, device, False, 128)
    convolution(results, device)
    attention(results, device)
    build.join()
    built = train._INITIAL.pop((config, 5))
    assert all(torch.equal(a, b) for a, b in zip(alone.state_dict().values(), built.state_dict().values()))
    torch.manual_seed(123)
    gemm(results, device, False, 128)
    convolution(results, device)
    attention(results, device)
    assert torch.equal(torch.get_rng_state(), before)  # the checks alone drew nothing from the global generator


def test_quick_measures_the_convolutions_of_the_dtype_it_trains_in() -> None:
    """--quick trains in bf16 alone, and measures convolution throughput in bf16 alone: on an H100 whose CUDA JIT
    cache was empty, cuDNN's autotuner spent 1.3 s compiling fp16 kernels (session 30, jitprobe.py); the full run
    measures both GPU dtypes, and CPUs fp32."""
    import torch

    from verify.conv import dtypes_measured

    assert dtypes_measured(cuda=True, quick=True) == {"bf16": torch.bfloat16}
    assert dtypes_measured(cuda=True, quick=False) == {"bf16": torch.bfloat16, "fp16": torch.float16}
    for quick in (True, False):
        assert dtypes_measured(cuda=False, quick=quick) == {"fp32": torch.float32}


def test_training_runs_attention_built_into_torch_and_gives_cudnns_switch_back() -> None:
    """Training and graph replay turn cuDNN's run-time-compiled attention off (a node's first verify compiles
    none of it for them) and restore the switch after, also when a check inside raises."""
    import torch

    from verify.train import attention_built_in

    switches = torch.backends.cuda
    saved = switches.cudnn_sdp_enabled()
    try:
        for before in (True, False):
            switches.enable_cudnn_sdp(before)
            with attention_built_in():
                assert switches.cudnn_sdp_enabled() is False
                assert switches.flash_sdp_enabled() and switches.mem_efficient_sdp_enabled()
            assert switches.cudnn_sdp_enabled() is before
            with pytest.raises(RuntimeError), attention_built_in():
                raise RuntimeError("a check failed")
            assert switches.cudnn_sdp_enabled() is before
    finally:
        switches.enable_cudnn_sdp(saved)


def test_the_kernel_trains_and_replays_without_cudnn_attention_and_checks_it_before(monkeypatch) -> None:
    """The kernel's check groups in order, each replaced by a probe of cuDNN attention's switch: on for the
    correctness checks (cuDNN attention is held to the math reference there), off for training and graph replay,
    on again after."""
    import argparse

    import torch

    import verify.run as kernel

    seen: dict[str, bool] = {}

    def probe(name: str, returned: object = None):
        def check_group(*args: object, **kwargs: object) -> object:
            seen[name] = torch.backends.cuda.cudnn_sdp_enabled()
            return returned

        return check_group

    for name in ("gemm", "convolution", "attention", "gemm_throughput", "conv_throughput", "bandwidth"):
        monkeypatch.setattr(kernel, name, probe(name))
    monkeypatch.setattr(kernel, "initial_model", lambda *args: None)
    monkeypatch.setattr(kernel.determinism, "judge", probe("determinism"))
    monkeypatch.setattr(kernel, "training", probe("training", {}))
    monkeypatch.setattr(kernel, "cuda_graphs", probe("cuda_graphs"))
    saved = torch.backends.cuda.cudnn_sdp_enabled()
    torch.backends.cuda.enable_cudnn_sdp(True)
    try:
        results = Results()
        kernel._checks(results, torch.device("cpu"), argparse.Namespace(quick=True, compile=False), {}, None)
        after = torch.backends.cuda.cudnn_sdp_enabled()
    finally:
        torch.backends.cuda.enable_cudnn_sdp(saved)
    assert seen == {
        "gemm": True,
        "convolution": True,
        "attention": True,
        "determinism": True,
        "gemm_throughput": True,
        "conv_throughput": True,
        "training": False,
        "cuda_graphs": False,
        "bandwidth": True,
    }
    assert after is True
    assert [check.name for check in results.checks if not check.passed] == []


@pytest.mark.parametrize("replayed, matches", [([2.5, 2.4, 2.3, 2.2, 2.1], True), ([2.5, 2.4, 2.3, 9.0, 9.0], False)])
def test_the_replay_time_is_a_figure_only_of_a_replay_that_computed_the_eager_step(
    replayed: list[float], matches: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The graph replay's step time is what lockgen's training floors judge a host-bound step by: a replay whose
    losses left the eager run's is failed by `replay_matches_eager` and leaves no time (the reason instead)."""
    import torch

    from verify import graphs
    from verify.schema import GRAPHS_BF16_REPLAY, GRAPHS_SPEEDUP

    steps = 6
    eager = {"losses": [2.5, 2.4, 2.3, 2.2, 2.1] + [2.0] * (graphs.WARMUP + steps - 5), "step_s": 0.045}
    losses = replayed + [2.0] * (graphs.WARMUP + steps - 5)
    monkeypatch.setattr(graphs, "_replayed", lambda *_: (losses, [0.0204] * steps))
    results = Results()
    graphs.cuda_graphs(results, torch.device("cuda"), True, eager)
    assert ("replay_matches_eager" in failures(results)) is not matches
    replay = results.figures[GRAPHS_BF16_REPLAY.group][GRAPHS_BF16_REPLAY.name]
    speedup = results.figures[GRAPHS_SPEEDUP.group][GRAPHS_SPEEDUP.name]
    if matches:
        assert replay.value == pytest.approx(20.4) and speedup.value == pytest.approx(45 / 20.4, rel=1e-3)
    else:
        assert replay.value is None and speedup.value is None and "replay_matches_eager" in (replay.reason or "")
