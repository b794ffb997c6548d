"""Performance envelopes: turns measured figures into pass/fail checks against per-arch floors (data).

A stack that runs but is slow fails with the figure, the floor and, where it is recognisable, the
cause (TF32 GEMMs at FP32 speed: TF32 is disabled, e.g. NVIDIA_TF32_OVERRIDE=0; slow convolutions name
cuDNN's version, its switches during the run and the kernels it picked; slow small all-reduces name the
NCCL settings that were in the environment).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from lockgen.core.certificate.failure_causes import likely_cause
from lockgen.core.gpu.package_data import load_json
from lockgen.model.certificate import Check, Figure, Figures, figure_at
from lockgen.model.json_values import JsonObject, object_at, text_at
from verify.schema import (
    ALLREDUCE_1GIB,
    ALLREDUCE_LATENCY_8B,
    GRAPHS_BF16_REPLAY,
    SPEEDUP_BF16_OVER_FP32,
    TRAINING_BF16_MODEL_TFLOPS,
    TRAINING_BF16_STEP,
    FigureRef,
    conv,
    gemm,
)

HOST_BOUND_SHARE = 0.9  # a step whose host issue time is this share of the step time or more is host-bound


@dataclass(frozen=True)
class Envelope:
    """One arch's envelope (`lockgen/data/envelopes.json`): datasheet peaks in TFLOP/s by dtype, the floors as
    shares of those peaks (GEMMs and convolutions by dtype, the model FLOPs of training) or as ratios, and the
    all-reduce's bus bandwidth floor and latency ceiling by link (nvlink, pcie)."""

    datasheet: dict[str, float]
    gemm_fraction: dict[str, float]
    conv_fraction: dict[str, float]
    speedup_bf16_over_fp32: float
    train_bf16_mfu: float
    free_memory_fraction: float | None
    allreduce_busbw_gbps: dict[str, float]
    allreduce_latency_us: dict[str, float]


@lru_cache(maxsize=1)
def load_envelopes() -> dict[str, Envelope]:
    archs = load_json("envelopes.json")["archs"]  # the package's own data, read as shipped
    return {
        arch: Envelope(
            datasheet=entry["datasheet"],
            gemm_fraction=entry["floors"]["gemm_fraction"],
            conv_fraction=entry["floors"].get("conv_fraction", {}),
            speedup_bf16_over_fp32=entry["floors"]["speedup_bf16_over_fp32"],
            train_bf16_mfu=entry["floors"]["train_bf16_mfu"],
            free_memory_fraction=entry["floors"].get("free_memory_fraction"),
            allreduce_busbw_gbps=entry["allreduce_busbw_gbps"],
            allreduce_latency_us=entry["allreduce_latency_us"],
        )
        for arch, entry in archs.items()
    }


def conv_floors(arch: str) -> dict[str, float]:
    """The convolution floors of an arch in TFLOP/s by dtype, passed to the kernel: a figure below its
    floor makes the kernel name the cuDNN kernels that took the time (profiling costs seconds otherwise)."""
    envelope = load_envelopes().get(arch)
    if envelope is None:
        return {}
    peaks = envelope.datasheet
    return {dtype: round(fraction * peaks[dtype], 1) for dtype, fraction in envelope.conv_fraction.items()}


def node_floors(arch: str) -> dict[str, float]:
    """The pre-flight floors of an arch passed to the kernel (the share of the GPU's memory that must be free
    before the run); none for an arch without an envelope."""
    envelope = load_envelopes().get(arch)
    if envelope is None or envelope.free_memory_fraction is None:
        return {}
    return {"free_memory_fraction": envelope.free_memory_fraction}


def _value(figures: Figures, ref: FigureRef) -> float | None:
    figure = figure_at(figures, ref)
    return None if figure is None else figure.value


def envelope_checks(
    arch: str,
    figures: Figures,
    stack: JsonObject,
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


def _host_bound(figures: Figures) -> tuple[float, float] | None:
    """(host issue ms, step ms) of a bf16 step whose pace the host set: issuing one step took nearly as long as the
    step itself (verify's `host_issue_ms`), so a slow or contended CPU, not the GPU stack, explains its figures;
    None for a step the GPU set the pace of, or one without those figures."""
    step = figure_at(figures, TRAINING_BF16_STEP)
    issue, measured = (step.host_issue_ms, step.value) if step is not None else (None, None)
    if not issue or not measured or issue < HOST_BOUND_SHARE * measured:
        return None
    return issue, measured


def _host_bound_note(figures: Figures) -> str:
    """Names a host-bound bf16 step (`_host_bound`) as the cause of a failed training floor."""
    bound = _host_bound(figures)
    if bound is None:
        return ""
    issue, measured = bound
    return (
        f"; the host took {issue:.1f} ms to issue a bf16 step that took {measured:.1f} ms: the step was host-bound"
        " (a slow or busy CPU), so the GPU stack may be sound: re-run on an idle host"
    )


def _training_judged(figures: Figures) -> tuple[float, str]:
    """What the training floors judge the bf16 step by: the eager step (factor 1), or, when the step was host-bound
    (`_host_bound`) and the same step was replayed as a CUDA graph faster (verify.graphs: captured from the same
    seed, no host in the loop; a replay whose losses left the eager run's records no time), the replayed step, as
    the factor eager / replayed that turns the eager step's speedup and model FLOPs into the replay's, and the words
    that say so (the eager step's pace stays in them: a host side made slow by the stack itself passes as a slow CPU
    does). On an idle H200 host whose CPU needed 33-44 ms to issue a step the GPU did in 20 ms, the eager figures
    alone failed one full run in five of a healthy node."""
    bound, replay = _host_bound(figures), _value(figures, GRAPHS_BF16_REPLAY)
    if bound is None or not replay or replay >= bound[1]:
        return 1.0, ""
    issue, measured = bound
    return measured / replay, (
        f" (the bf16 step replayed as a CUDA graph, {replay:.1f} ms: the eager step, {measured:.1f} ms, was "
        f"host-bound, the host taking {issue:.1f} ms to issue it)"
    )


def _floor_checks(arch: str, figures: Figures, stack: JsonObject, interconnect: str, gpu_count: int) -> list[Check]:
    envelope = load_envelopes().get(arch)
    if envelope is None:
        return []
    peaks = envelope.datasheet
    checks = []
    for dtype, fraction in envelope.gemm_fraction.items():
        measured = _value(figures, gemm(dtype))
        if measured is None:
            continue
        floor = fraction * peaks[dtype]
        share = f"{measured / peaks[dtype]:.0%} of the {peaks[dtype]:g} datasheet peak"
        detail = f"{measured:.0f} TFLOP/s = {share} (floor {fraction:.0%})"
        fp32 = _value(figures, gemm("fp32"))
        if dtype == "tf32" and measured < floor and fp32 and measured < 1.5 * fp32:
            override = text_at(stack, "tf32_override")
            setting = f" (NVIDIA_TF32_OVERRIDE={override})" if override else ""
            detail += f"; TF32 runs at FP32 speed: TF32 is disabled{setting}"
        checks.append(
            Check(
                category="performance",
                name=f"gemm_{dtype}_floor",
                passed=measured >= floor,
                detail=detail,
                value=measured,
            )
        )
    factor, replayed = _training_judged(figures)
    host_bound = "" if replayed else _host_bound_note(figures)  # the cause named by a failed training floor
    speedup = _value(figures, SPEEDUP_BF16_OVER_FP32)
    if speedup is not None:
        speedup *= factor
        floor = envelope.speedup_bf16_over_fp32
        checks.append(
            Check(
                category="performance",
                name="amp_speedup_floor",
                passed=speedup >= floor,
                detail=f"bf16 autocast trains {speedup:.1f}x faster than fp32{replayed} (floor {floor:g}x)"
                + ("" if speedup >= floor else host_bound),
                value=speedup,
            )
        )
    model_tflops = _value(figures, TRAINING_BF16_MODEL_TFLOPS)
    if model_tflops is not None:
        model_tflops *= factor
        mfu = model_tflops / peaks["bf16"]
        floor = envelope.train_bf16_mfu
        checks.append(
            Check(
                category="performance",
                name="train_mfu_floor",
                passed=mfu >= floor,
                detail=f"bf16 GPT step at {model_tflops:.0f} TFLOP/s of model FLOPs = {mfu:.0%} MFU{replayed} "
                f"(floor {floor:.0%})" + ("" if mfu >= floor else host_bound),
                value=mfu,
            )
        )
    checks += _conv_checks(figures, stack, peaks, envelope.conv_fraction)
    busbw = _value(figures, ALLREDUCE_1GIB)
    if busbw is not None and gpu_count > 1:
        link = "nvlink" if interconnect == "nvlink" else "pcie"
        floor = envelope.allreduce_busbw_gbps[link]
        checks.append(
            Check(
                category="performance",
                name="allreduce_busbw_floor",
                passed=busbw >= floor,
                detail=f"1 GiB all-reduce at {busbw:.0f} GB/s bus bandwidth over {link} (floor {floor} GB/s)",
                value=busbw,
            )
        )
    latency = _value(figures, ALLREDUCE_LATENCY_8B)
    if latency is not None and gpu_count > 1:
        link = "nvlink" if interconnect == "nvlink" else "pcie"
        ceiling = envelope.allreduce_latency_us[link]
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
    figures: Figures,
    stack: JsonObject,
    peaks: dict[str, float],
    fractions: dict[str, float],
) -> list[Check]:
    """The convolution block stack's TFLOP/s per dtype against its floor; a miss names what chose the kernels."""
    checks = []
    for dtype, fraction in fractions.items():
        entry = figure_at(figures, conv(dtype))
        measured = None if entry is None else entry.value
        if entry is None or measured is None:
            continue
        passed = measured >= fraction * peaks[dtype]
        share = f"{measured / peaks[dtype]:.0%} of the {peaks[dtype]:g} datasheet peak"
        detail = f"{measured:.0f} TFLOP/s in convolutions = {share} (floor {fraction:.0%})"
        if not passed:
            detail += _conv_cause(entry, stack)
        checks.append(
            Check(category="performance", name=f"conv_{dtype}_floor", passed=passed, detail=detail, value=measured)
        )
    return checks


def _conv_cause(entry: Figure, stack: JsonObject) -> str:
    """cuDNN's version, the switches that steer its choice as the run had them, and the kernel that took the time."""
    settings = entry.cudnn
    parts = [f"cuDNN {stack.get('cudnn') or 'not loaded'}"]
    if settings is not None and not settings.enabled:
        parts.append("cuDNN disabled (torch's own convolutions ran)")
    if settings is not None and not settings.benchmark:
        parts.append("autotuner off (cudnn.benchmark=False: heuristics chose)")
    if settings is not None and settings.deterministic:
        parts.append("deterministic algorithms only")
    if settings is not None and settings.fault:
        parts.append(f"VERIFY_FAULT_CUDNN={settings.fault}")
    if entry.kernels:
        top = entry.kernels[0]
        parts.append(f"most time in {top.kernel} ({top.share:.0%})")
    return "; " + ", ".join(parts)


NCCL_LATENCY_SETTINGS = (
    "NCCL_PROTO",
    "NCCL_ALGO",
    "NCCL_P2P_DISABLE",
    "NCCL_SHM_DISABLE",
    "NCCL_NET",
    "NCCL_IB_DISABLE",
)


def _nccl_settings(stack: JsonObject) -> str:
    """The NCCL variables the kernel saw that move small-message latency (NCCL_PROTO=Simple drops LL/LL128)."""
    seen = object_at(stack, "nccl_env")
    named = [f"{name}={seen[name]}" for name in NCCL_LATENCY_SETTINGS if name in seen]
    return (
        f"; NCCL {stack.get('nccl') or '?'} with {', '.join(named)}"
        if named
        else f"; NCCL {stack.get('nccl') or '?'}, no NCCL_* setting in the environment"
    )
