"""Performance envelopes: turns measured figures into pass/fail checks against per-arch floors (data).

A stack that runs but is slow fails with the figure, the floor and, where it is recognisable, the
cause (TF32 GEMMs at FP32 speed: TF32 is disabled, e.g. NVIDIA_TF32_OVERRIDE=0; slow convolutions name
cuDNN's version, its switches during the run and the kernels it picked; slow small all-reduces name the
NCCL settings that were in the environment).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from lockgen.core.certificate.failure_causes import likely_cause
from lockgen.core.gpu.package_data import load_json
from lockgen.model.certificate import Check

HOST_BOUND_SHARE = 0.9  # a step whose host issue time is this share of the step time or more is host-bound


@lru_cache(maxsize=1)
def load_envelopes() -> dict[str, Any]:
    archs: dict[str, Any] = load_json("envelopes.json")["archs"]
    return archs


def conv_floors(arch: str) -> dict[str, float]:
    """The convolution floors of an arch in TFLOP/s by dtype, passed to the kernel: a figure below its
    floor makes the kernel name the cuDNN kernels that took the time (profiling costs seconds otherwise)."""
    envelope = load_envelopes().get(arch)
    if envelope is None:
        return {}
    peaks = envelope["datasheet"]
    return {
        dtype: round(fraction * peaks[dtype], 1)
        for dtype, fraction in envelope["floors"].get("conv_fraction", {}).items()
    }


def node_floors(arch: str) -> dict[str, float]:
    """The pre-flight floors of an arch passed to the kernel (the share of the GPU's memory that must be free
    before the run); none for an arch without an envelope."""
    envelope = load_envelopes().get(arch)
    if envelope is None or "free_memory_fraction" not in envelope["floors"]:
        return {}
    return {"free_memory_fraction": envelope["floors"]["free_memory_fraction"]}


def _value(figures: dict[str, dict[str, dict[str, Any]]], group: str, name: str) -> float | None:
    entry = figures.get(group, {}).get(name)
    return None if entry is None else entry.get("value")


def envelope_checks(
    arch: str,
    figures: dict[str, dict[str, dict[str, Any]]],
    stack: dict[str, Any],
    interconnect: str,
    gpu_count: int,
    clock_limits: tuple[str, ...] = (),
) -> list[Check]:
    """One check per floor of the arch; no envelope (cpu, an arch without data) gives no checks.
    A failed floor names its likely cause (`failure_causes`: another process, a setting, a foreign library,
    the clock limits NVML reported), and a failed training floor a host-bound step."""
    checks = _floor_checks(arch, figures, stack, interconnect, gpu_count)
    reason = likely_cause(stack, clock_limits)
    if not reason:
        return checks
    return [c if c.passed else c.model_copy(update={"detail": c.detail + reason}) for c in checks]


def _host_bound_note(figures: dict[str, dict[str, dict[str, Any]]]) -> str:
    """Names a bf16 step whose pace the host set: issuing one step took nearly as long as the step itself
    (verify's `host_issue_ms`), so a slow or contended CPU, not the GPU stack, explains the figure."""
    step = figures.get("training", {}).get("bf16_step_ms") or {}
    issue, measured = step.get("host_issue_ms"), step.get("value")
    if not issue or not measured or issue < HOST_BOUND_SHARE * measured:
        return ""
    return (
        f"; the host took {issue:.1f} ms to issue a bf16 step that took {measured:.1f} ms: the step was host-bound "
        "(a slow or busy CPU), so the GPU stack may be sound: re-run on an idle host"
    )


def _floor_checks(
    arch: str, figures: dict[str, dict[str, dict[str, Any]]], stack: dict[str, Any], interconnect: str, gpu_count: int
) -> list[Check]:
    envelope = load_envelopes().get(arch)
    if envelope is None:
        return []
    peaks, floors = envelope["datasheet"], envelope["floors"]
    checks = []
    for dtype, fraction in floors["gemm_fraction"].items():
        measured = _value(figures, "gemm", dtype)
        if measured is None:
            continue
        floor = fraction * peaks[dtype]
        detail = (
            f"{measured:.0f} TFLOP/s = {measured / peaks[dtype]:.0%} of the {peaks[dtype]:g} datasheet peak (floor "
            f"{fraction:.0%})"
        )
        fp32 = _value(figures, "gemm", "fp32")
        if dtype == "tf32" and measured < floor and fp32 and measured < 1.5 * fp32:
            override = stack.get("tf32_override")
            detail += (
                "; TF32 runs at FP32 speed: TF32 is "
                f"disabled{' (NVIDIA_TF32_OVERRIDE=' + override + ')' if override else ''}"
            )
        checks.append(
            Check(
                category="performance",
                name=f"gemm_{dtype}_floor",
                passed=measured >= floor,
                detail=detail,
                value=measured,
            )
        )
    host_bound = _host_bound_note(figures)  # the cause named by a failed training floor
    speedup = _value(figures, "training", "speedup_bf16_over_fp32")
    if speedup is not None:
        floor = floors["speedup_bf16_over_fp32"]
        checks.append(
            Check(
                category="performance",
                name="amp_speedup_floor",
                passed=speedup >= floor,
                detail=f"bf16 autocast trains {speedup:.1f}x faster than fp32 (floor {floor:g}x)"
                + ("" if speedup >= floor else host_bound),
                value=speedup,
            )
        )
    model_tflops = _value(figures, "training", "bf16_model_tflops")
    if model_tflops is not None:
        mfu = model_tflops / peaks["bf16"]
        floor = floors["train_bf16_mfu"]
        checks.append(
            Check(
                category="performance",
                name="train_mfu_floor",
                passed=mfu >= floor,
                detail=f"bf16 GPT step at {model_tflops:.0f} TFLOP/s of model FLOPs = {mfu:.0%} MFU (floor {floor:.0%})"
                + ("" if mfu >= floor else host_bound),
                value=mfu,
            )
        )
    checks += _conv_checks(figures, stack, peaks, floors.get("conv_fraction", {}))
    busbw = _value(figures, "allreduce", "1024MiB")
    if busbw is not None and gpu_count > 1:
        link = "nvlink" if interconnect == "nvlink" else "pcie"
        floor = envelope["allreduce_busbw_gbps"][link]
        checks.append(
            Check(
                category="performance",
                name="allreduce_busbw_floor",
                passed=busbw >= floor,
                detail=f"1 GiB all-reduce at {busbw:.0f} GB/s bus bandwidth over {link} (floor {floor} GB/s)",
                value=busbw,
            )
        )
    latency = _value(figures, "allreduce_latency", "8B")
    if latency is not None and gpu_count > 1:
        link = "nvlink" if interconnect == "nvlink" else "pcie"
        ceiling = envelope["allreduce_latency_us"][link]
        detail = f"8 B all-reduce in {latency:.1f} us over {link} (ceiling {ceiling} us)"
        if latency > ceiling:
            detail += _nccl_settings(stack)
        checks.append(
            Check(
                category="performance",
                name="allreduce_latency_ceiling",
                passed=latency <= ceiling,
                detail=detail,
                value=latency,
            )
        )
    return checks


def _conv_checks(
    figures: dict[str, dict[str, dict[str, Any]]],
    stack: dict[str, Any],
    peaks: dict[str, float],
    fractions: dict[str, float],
) -> list[Check]:
    """The convolution block stack's TFLOP/s per dtype against its floor; a miss names what chose the kernels."""
    checks = []
    for dtype, fraction in fractions.items():
        entry = figures.get("conv", {}).get(dtype) or {}
        measured = entry.get("value")
        if measured is None:
            continue
        passed = measured >= fraction * peaks[dtype]
        detail = (
            f"{measured:.0f} TFLOP/s in convolutions = {measured / peaks[dtype]:.0%} of the {peaks[dtype]:g} "
            f"datasheet peak (floor {fraction:.0%})"
        )
        if not passed:
            detail += _conv_cause(entry, stack)
        checks.append(
            Check(category="performance", name=f"conv_{dtype}_floor", passed=passed, detail=detail, value=measured)
        )
    return checks


def _conv_cause(entry: dict[str, Any], stack: dict[str, Any]) -> str:
    """cuDNN's version, the switches that steer its choice as the run had them, and the kernel that took the time."""
    settings = entry.get("cudnn") or {}
    parts = [f"cuDNN {stack.get('cudnn') or 'not loaded'}"]
    if settings.get("enabled") is False:
        parts.append("cuDNN disabled (torch's own convolutions ran)")
    if settings.get("benchmark") is False:
        parts.append("autotuner off (cudnn.benchmark=False: heuristics chose)")
    if settings.get("deterministic"):
        parts.append("deterministic algorithms only")
    if settings.get("fault"):
        parts.append(f"VERIFY_FAULT_CUDNN={settings['fault']}")
    kernels = entry.get("kernels") or []
    if kernels:
        top = kernels[0]
        parts.append(f"most time in {top['kernel']} ({top['share']:.0%})")
    return "; " + ", ".join(parts)


NCCL_LATENCY_SETTINGS = (
    "NCCL_PROTO",
    "NCCL_ALGO",
    "NCCL_P2P_DISABLE",
    "NCCL_SHM_DISABLE",
    "NCCL_NET",
    "NCCL_IB_DISABLE",
)


def _nccl_settings(stack: dict[str, Any]) -> str:
    """The NCCL variables the kernel saw that move small-message latency (NCCL_PROTO=Simple drops LL/LL128)."""
    seen = stack.get("nccl_env") or {}
    named = [f"{name}={seen[name]}" for name in NCCL_LATENCY_SETTINGS if name in seen]
    return (
        f"; NCCL {stack.get('nccl') or '?'} with {', '.join(named)}"
        if named
        else f"; NCCL {stack.get('nccl') or '?'}, no NCCL_* setting in the environment"
    )
