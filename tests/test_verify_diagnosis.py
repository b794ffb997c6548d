"""Verify names the real cause of a failure: the node's pre-flight readings (another process on the GPU, its
memory held, memory errors, a narrowed PCIe link), the settings and the libraries the kernel process ran
with, and the attribution of a failed floor, in order. The NVML readings themselves are read on the H200
(envs/examples/h200-system/diagnosis/, with the faults injected there); here the rules run on readings
as NVML gives them, and the process checks run for real in the CPU kernel."""

from __future__ import annotations

import ctypes.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lockgen.core.certificate.envelopes import envelope_checks
from lockgen.core.certificate.failure_causes import likely_cause
from lockgen.model.certificate import Figure, Figures
from tests.conftest import REPO
from verify import node_health, preflight, process_env
from verify.results import Results

HEALTHY = {
    "available": True,
    "processes": [],
    "memory": {"total_gib": 139.8, "free_gib": 139.3, "used_gib": 0.5},
    "persistence_mode": True,
    "ecc_enabled": True,
    "ecc_uncorrected_volatile": 0,
    "remap_pending": False,
    "remap_failed": False,
    "retired_pages_pending": None,
    "remapped_rows_uncorrected": 0,
    "pcie_width": 16,
    "pcie_width_max": 16,
    "pcie_gen": 1,
    "pcie_gen_max": 5,
    "util_at_rest": 0.0,
    "clock_limits_at_rest": [],
}


def typed(figures: dict) -> Figures:
    """Figures as the certificate model reads them from a certificate's JSON."""
    return {
        group: {name: Figure.model_validate(e) for name, e in entries.items()} for group, entries in figures.items()
    }


def _node(monkeypatch: pytest.MonkeyPatch, reading: dict, own: set[int] = frozenset()) -> dict[str, dict]:
    monkeypatch.setattr(node_health, "health", lambda nvml, index: dict(reading))
    results = Results()
    preflight.node_checks(results, object(), set(own), {"free_memory_fraction": 0.9})  # type: ignore[arg-type]
    return {c["name"]: c for c in results.checks_json()}


def test_a_healthy_node_passes_every_node_check(monkeypatch: pytest.MonkeyPatch) -> None:
    checks = _node(monkeypatch, HEALTHY)
    assert {n: c["passed"] for n, c in checks.items()} == {
        "no_other_process": True,
        "free_memory": True,
        "memory_health": True,
        "pcie_link": True,
    }


def test_another_process_and_the_memory_it_holds_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    stray = {"pid": 4242, "name": "python3", "memory_mib": 122880, "kind": "compute"}
    mine = {"pid": os.getpid(), "name": "python3", "memory_mib": 500, "kind": "compute"}
    reading = {
        **HEALTHY,
        "processes": [stray, mine],
        "memory": {"total_gib": 139.8, "free_gib": 19.3, "used_gib": 120.5},
    }
    checks = _node(monkeypatch, reading, {os.getpid()})
    assert (
        not checks["no_other_process"]["passed"]
        and "pid 4242 (python3, 120.0 GiB)" in checks["no_other_process"]["detail"]
    )
    assert f"pid {os.getpid()}" not in checks["no_other_process"]["detail"]  # the kernel itself is no other process
    assert not checks["free_memory"]["passed"] and "19.3 of 139.8 GiB free" in checks["free_memory"]["detail"]
    assert "held by pid 4242" in checks["free_memory"]["detail"]


@pytest.mark.parametrize(
    "fault, words",
    [
        ({"remap_pending": True}, "row remap is pending"),
        ({"remap_failed": True}, "row remap failed"),
        ({"ecc_uncorrected_volatile": 3}, "3 uncorrectable ECC errors"),
        ({"retired_pages_pending": True}, "page retirement is pending"),
    ],
)
def test_memory_errors_fail_the_node(monkeypatch: pytest.MonkeyPatch, fault: dict, words: str) -> None:
    check = _node(monkeypatch, {**HEALTHY, **fault})["memory_health"]
    assert not check["passed"] and words in check["detail"]


def test_a_narrowed_pcie_link_fails_but_a_slower_generation_at_rest_does_not(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _node(monkeypatch, {**HEALTHY, "pcie_gen": 1})["pcie_link"]["passed"]
    narrow = _node(monkeypatch, {**HEALTHY, "pcie_width": 8})["pcie_link"]
    assert not narrow["passed"] and "PCIe x8 of x16" in narrow["detail"]


def test_settings_known_to_slow_work_are_named() -> None:
    variables = process_env.behaviour_variables(
        {"CUDA_LAUNCH_BLOCKING": "1", "NCCL_DEBUG": "INFO", "HOME": "/root", "NVIDIA_TF32_OVERRIDE": "1"}
    )
    assert variables == {"CUDA_LAUNCH_BLOCKING": "1", "NCCL_DEBUG": "INFO", "NVIDIA_TF32_OVERRIDE": "1"}
    assert process_env.slowing_settings(variables) == [
        "CUDA_LAUNCH_BLOCKING=1 (makes every kernel launch wait for the GPU (serialised launches))"
    ]
    assert process_env.slowing_settings({"CUDA_LAUNCH_BLOCKING": "0"}) == []


def test_libraries_from_outside_the_environment_are_foreign(tmp_path: Path) -> None:
    env = tmp_path / "env"
    maps = (
        "\n".join(
            f"7f00-7f01 r-xp 00000000 08:01 1 {path}"
            for path in (
                f"{env}/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so",  # the environment's
                "/usr/local/nvidia/lib64/libcuda.so.580.65.06",  # the driver's, wherever it is
                "/usr/lib/x86_64-linux-gnu/libc.so.6",  # the system's
                "/usr/lib/x86_64-linux-gnu/libcudnn.so.9",  # cuDNN, but not the lock's: shadowed
                "/tmp/preload/libhook.so",  # preloaded from anywhere
            )
        )
        + "\n7f02-7f03 rw-p 00000000 00:00 0 [heap]\n"
    )
    loaded = process_env.loaded_libraries(maps)
    assert len(loaded) == 5
    assert process_env.foreign_libraries(loaded, str(env), str(tmp_path / "base"), []) == [
        "/tmp/preload/libhook.so",
        "/usr/lib/x86_64-linux-gnu/libcudnn.so.9",
    ]


def test_the_cause_named_first_is_the_strongest_evidence() -> None:
    stack = {
        "node": {"other_processes": [{"pid": 9, "name": "train.py", "memory_mib": 2048}], "util_at_rest": 100.0},
        "slowing_settings": ["CUDA_LAUNCH_BLOCKING=1 (…)"],
        "libraries": {"foreign": ["/tmp/x.so"]},
    }
    limits = ("software power cap",)
    assert "another process was on the GPU when the run started: pid 9 (train.py, 2.0 GiB)" in likely_cause(
        stack, limits
    )
    assert "power cap" not in likely_cause(stack, limits)
    stack["node"] = {"other_processes": [], "util_at_rest": 97.0}
    assert "97% busy before the first kernel" in likely_cause(stack, limits)
    stack["node"] = {}
    assert likely_cause(stack, limits).startswith("; set in the environment: CUDA_LAUNCH_BLOCKING=1")
    stack["slowing_settings"] = []
    assert "libraries from outside the environment were loaded: /tmp/x.so" in likely_cause(stack, limits)
    stack["libraries"] = {"foreign": []}
    assert likely_cause(stack, limits) == "; the GPU's clocks were held down during the run by: software power cap"
    assert likely_cause({}, ()) == ""


def test_a_failed_floor_blames_the_other_process_not_the_power_cap() -> None:
    figures = {"gemm": {"bf16": {"value": 300.0, "unit": "TFLOP/s"}}}
    stack = {"node": {"other_processes": [{"pid": 77, "name": "python3", "memory_mib": 1024}]}}
    failed = [
        c for c in envelope_checks("sm90", typed(figures), stack, "nvlink", 1, ("software power cap",)) if not c.passed
    ]
    assert failed and all("pid 77 (python3" in c.detail and "power cap" not in c.detail for c in failed)


@pytest.mark.slow
def test_the_cpu_kernel_names_a_preloaded_library_and_the_setting(tmp_path: Path) -> None:
    """For real: the CPU kernel under LD_PRELOAD of a library copied outside the environment and the system."""
    system_libz = ctypes.util.find_library("z")
    found = next(
        (
            p
            for p in (
                "/usr/lib/x86_64-linux-gnu/libz.so.1",
                "/lib/x86_64-linux-gnu/libz.so.1",
                "/usr/lib/aarch64-linux-gnu/libz.so.1",
            )
            if Path(p).exists()
        ),
        None,
    )
    assert system_libz and found, "zlib is part of every Debian system"
    copied = tmp_path / "preload" / "libz.so.1"
    copied.parent.mkdir()
    shutil.copy(found, copied)
    out = tmp_path / "report.json"
    env = {**os.environ, "LD_PRELOAD": str(copied), "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "verify", "--arch", "cpu", "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    checks = {c["name"]: c for c in json.loads(out.read_text())["checks"] if c["category"] == "process"}
    assert not checks["libraries"]["passed"] and str(copied) in checks["libraries"]["detail"]
    assert not checks["settings"]["passed"] and f"LD_PRELOAD={copied}" in checks["settings"]["detail"]


# A kernel that dies (issue 48): with PYTORCH_NO_CUDA_MEMORY_CACHING=1 the kernel died by SIGABRT on the lent
# H100 and the error line was a C++ stack frame; the phase and the setting must be named instead.
ABORT_TAIL = [
    "ok   training/bf16_loss_falls: first 10.500, mean of last 3 7.594 (must be < 80% of first)",
    "@phase cuda_graphs",
    "@phase cuda_graphs/capture",
    "terminate called after throwing an instance of 'c10::AcceleratorError'",
    "  what():  CUDA error: operation not permitted when stream is capturing",
    "Exception raised from c10_cuda_check_implementation at /pytorch/c10/cuda/CUDAException.cpp:44 (most recent "
    "call first):",
    "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x9d (0x7f0 in libc10.so)",
    "frame #22: _start + 0x25 (0x5a4 in /opt/torch/.venv/bin/python3)",
]


def test_a_dead_kernel_is_named_with_its_phase_and_the_setting_that_breaks_it() -> None:
    from lockgen.core.certificate.kernel_deaths import describe_death

    message, unset = describe_death(
        "the verification kernel", -6, ABORT_TAIL, {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1", "HOME": "/root"}
    )
    assert message.startswith(
        "the verification kernel died by SIGABRT in phase cuda_graphs/capture: CUDA error: operation not "
        "permitted when stream is capturing"
    )
    assert (
        "PYTORCH_NO_CUDA_MEMORY_CACHING=1: CUDA graph capture needs PyTorch's caching allocator" in message
        and "frame #" not in message
    )
    assert unset == ["PYTORCH_NO_CUDA_MEMORY_CACHING"]
    # the same death without the setting names no setting; a setting that breaks another phase is named as such
    assert describe_death("k", -6, ABORT_TAIL, {}) == (
        "k died by SIGABRT in phase cuda_graphs/capture: CUDA error: operation not permitted when stream is capturing",
        [],
    )
    elsewhere, _ = describe_death("k", -9, ["@phase training", "frame #3: x"], {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"})
    assert (
        elsewhere.startswith("k died by SIGKILL in phase training")
        and "also set in its environment: PYTORCH_NO_CUDA_MEMORY_CACHING=1" in elsewhere
    )
    assert (
        describe_death("k", 3, ["Traceback (most recent call last):", "ValueError: bad"], {})[0]
        == "k exit 3 before its first phase: ValueError: bad"
    )


def test_a_check_line_is_not_the_error_and_a_setting_of_another_phase_is_not_blamed() -> None:
    """A review saw `died by SIGKILL in phase convolution: ok   correctness/gemm_bf16: relative error ...`: the
    kernel's last check line quoted as the error. Nothing follows the phase when no line says what went wrong; and a
    setting known to break another phase is said as set, never put in the hint (`unset ...` would not help)."""
    from lockgen.core.certificate.kernel_deaths import describe_death

    checks = [
        "ok   correctness/gemm_bf16: relative error 1.65e-03 (limit 2e-02)",
        "@phase convolution",
        "FAIL correctness/conv_forward: relative error 3.0e-01 (limit 1e-04)",
    ]
    assert describe_death("k", -9, checks, {}) == ("k died by SIGKILL in phase convolution", [])
    assert describe_death("k", -9, [*checks, "RuntimeError: out of memory"], {})[0] == (
        "k died by SIGKILL in phase convolution: RuntimeError: out of memory"
    )
    message, unset = describe_death("k", -9, checks, {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"})
    assert message.startswith("k died by SIGKILL in phase convolution; also set in its environment: PYTORCH_NO_CUDA")
    assert unset == []


def test_a_kernel_past_its_timeout_is_named_with_its_phase_and_a_hint_for_its_machine() -> None:
    """A CPU run killed at `--timeout` named `nvidia-smi` and NCCL, and not the phase it hung in."""
    from lockgen.adapters.node import kernel
    from lockgen.errors import KernelError

    hangs = (
        "import time\nfrom verify.results import mark_phase\nmark_phase('training')\nmark_phase('training/bf16')\n"
        "time.sleep(300)\n"
    )
    for cpu in (True, False):
        with pytest.raises(KernelError) as raised:
            kernel._run([sys.executable, "-c", hangs], 5, lambda line: None, "the verification kernel", {}, [], cpu=cpu)
        assert str(raised.value) == (
            "the verification kernel did not finish within 5 s in phase training/bf16; every process it started was "
            "killed"
        )
        assert ("nvidia-smi" in raised.value.hint) is not cpu and "raise --timeout" in raised.value.hint
        assert raised.value.timed_out


@pytest.mark.parametrize(
    ("seconds", "said"), [(0.4, "0.4 s"), (0.05, "0.05 s"), (2.5, "2.5 s"), (5, "5 s"), (10, "10 s"), (600.4, "600 s")]
)
def test_a_time_limit_under_ten_seconds_is_said_with_its_decimals(seconds: float, said: str) -> None:
    """`verify --timeout 0.4` said "did not finish within 0 s": a limit under 10 s keeps its decimals, a longer
    one is said in whole seconds."""
    from lockgen.core.certificate.kernel_deaths import describe_timeout, limit_text

    assert limit_text(seconds) == said
    message, _ = describe_timeout("the verification kernel", seconds, [], ranks=False, cpu=True)
    assert message.startswith(f"the verification kernel did not finish within {said};"), message


def test_a_kernel_killed_by_a_signal_is_named_with_its_phase(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in kernel announces its phases as verify does, prints an abort's frames and kills itself with
    SIGABRT inside the graph capture: lockgen's error names the signal, the phase, the error line and the setting."""
    from lockgen.adapters.node import kernel
    from lockgen.errors import KernelError

    script = tmp_path / "dies.py"
    script.write_text(
        "import os, signal, sys\n"
        "from verify.results import mark_phase\n"
        "mark_phase('training')\nmark_phase('cuda_graphs')\nmark_phase('cuda_graphs/capture')\n"
        f"sys.stderr.write({chr(10).join(ABORT_TAIL[3:]) + chr(10)!r})\nsys.stderr.flush()\n"
        "os.kill(os.getpid(), signal.SIGABRT)\n"
    )
    monkeypatch.setenv("PYTORCH_NO_CUDA_MEMORY_CACHING", "1")
    with pytest.raises(KernelError) as raised:
        kernel._run([sys.executable, str(script)], 60, lambda line: None, "the verification kernel", {}, [str(script)])
    assert str(raised.value).startswith(
        "the verification kernel died by SIGABRT in phase cuda_graphs/capture: CUDA error: operation not permitted"
    )
    assert (
        "PYTORCH_NO_CUDA_MEMORY_CACHING=1" in str(raised.value)
        and raised.value.hint == "unset PYTORCH_NO_CUDA_MEMORY_CACHING and verify again"
    )


def test_the_cpu_kernel_killed_in_a_phase_is_named_with_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real CPU kernel, killed (SIGKILL) once it reports its first correctness check: the error names the
    signal and the phase its own `@phase` line announced."""
    from lockgen.adapters.node import kernel
    from lockgen.errors import KernelError

    started: list[subprocess.Popen] = []

    class Kept(subprocess.Popen):  # type: ignore[type-arg]
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            started.append(self)

    monkeypatch.setattr(kernel.subprocess, "Popen", Kept)

    def progress(line: str) -> None:
        if "correctness/gemm_fp32" in line:
            os.kill(started[0].pid, 9)

    with pytest.raises(KernelError) as raised:
        kernel.run_single(sys.executable, "cpu", {}, True, False, False, 300, progress)
    assert str(raised.value).startswith("the verification kernel died by SIGKILL in phase gemm")
