"""The certificate's schema, defined once: the checks and figures the kernel writes, as records, and the figures
by name (`FigureRef`) that lockgen's envelopes and headlines read.

The standard library alone (no torch): lockgen imports this module (`lockgen.core.certificate.envelopes`) and
mirrors its records as pydantic models (`lockgen.model.certificate`), which a test holds equal field for field.
A record's JSON (`as_json`) is what the kernel prints: a field left None is left out, but a figure's `value`,
which is null for a figure that did not run."""

from __future__ import annotations

from dataclasses import dataclass, fields

ALWAYS_WRITTEN = frozenset({"value"})  # written as null too: a figure that did not run says so


def as_json(record: object) -> dict[str, object]:
    """A record's JSON object: its fields by name, None ones left out (but `value`), records and tuples within
    written as objects and lists."""
    written: dict[str, object] = {}
    for item in fields(record):  # type: ignore[arg-type]  # a dataclass instance: every record below
        value = getattr(record, item.name)
        if value is not None or item.name in ALWAYS_WRITTEN:
            written[item.name] = _json_value(value)
    return written


def _json_value(value: object) -> object:
    if isinstance(value, tuple):
        return [_json_value(item) for item in value]
    if hasattr(value, "__dataclass_fields__"):
        return as_json(value)
    return value


@dataclass(frozen=True)
class Check:
    """One pass/fail judgement with the reason, and the measured value when there is one."""

    category: str
    name: str
    passed: bool
    detail: str
    value: float | None = None

    def as_json(self) -> dict[str, object]:
        """Every field, `value` null when there is none (as the kernel always wrote it)."""
        return {
            "category": self.category,
            "name": self.name,
            "passed": self.passed,
            "detail": self.detail,
            "value": self.value,
        }


@dataclass(frozen=True)
class Spread:
    """The least, greatest and mean of one quantity's samples."""

    min: float
    max: float
    mean: float


@dataclass(frozen=True)
class GpuDuring:
    """One GPU's samples during a phase (`verify.nvml`): utilisation, power, temperature, clocks, and the clock
    limits (power cap, thermal slowdown...) it reported."""

    util: Spread | None = None
    power_w: Spread | None = None
    temp_c: Spread | None = None
    sm_mhz: Spread | None = None
    mem_mhz: Spread | None = None
    clock_limits_seen: tuple[str, ...] | None = None


@dataclass(frozen=True)
class CudnnChoice:
    """cuDNN's switches during the convolution figures, and the fault that stood in for a bad stack if any."""

    enabled: bool
    benchmark: bool
    deterministic: bool
    fault: str | None = None


@dataclass(frozen=True)
class KernelShare:
    """A GPU kernel by name and its share of one step's GPU time."""

    kernel: str
    share: float


@dataclass(frozen=True)
class Figure:
    """One measured number with its unit (`value` None: not run, and `reason` says why), and what it was
    measured on: the work's sizes, every burst, the GPU's state during it, what chose the kernels."""

    value: float | None
    unit: str
    reason: str | None = None
    size: int | None = None  # a GEMM's side
    products: int | None = None  # GEMMs in the sustained figure
    bytes: int | None = None  # copied per transfer
    total_gib: float | None = None  # the GPU's memory
    batch: int | None = None
    sequence: int | None = None
    channels: int | None = None
    side: int | None = None
    blocks: int | None = None
    steps: int | None = None
    params_m: float | None = None  # the model's parameters, in millions
    bursts: tuple[float, ...] | None = None  # each burst's rate, the figure the best
    steps_ms: tuple[float, ...] | None = None
    batches_us: tuple[float, ...] | None = None
    host_issue_ms: float | None = None  # the host's time to issue one step
    eager_step_ms: float | None = None
    algbw: float | None = None  # an all-reduce's algorithm bandwidth, GB/s
    time_us: float | None = None
    gpu: GpuDuring | None = None
    cudnn: CudnnChoice | None = None
    kernels: tuple[KernelShare, ...] | None = None


@dataclass(frozen=True)
class KernelNumerics:
    """The numerics fingerprint as the kernel computes it (`verify.numerics`): the SHA-256 of each piece of
    deterministic work's output bits, the work and device that made them, the versions loaded, the seconds taken."""

    work: str
    device: str
    versions: dict[str, str | None]
    digests: dict[str, str]
    seconds: float


@dataclass(frozen=True)
class FigureRef:
    """A figure by its group and name in the certificate's `figures`."""

    group: str
    name: str


def gemm(dtype: str) -> FigureRef:
    """The best burst's GEMM TFLOP/s in `dtype` (fp32, tf32, bf16, fp16, fp8)."""
    return FigureRef("gemm", dtype)


def conv(dtype: str) -> FigureRef:
    """The convolution block stack's TFLOP/s in `dtype`."""
    return FigureRef("conv", dtype)


def training_step_ms(mode: str) -> FigureRef:
    """The median training step in `mode` (fp32, tf32, bf16, fp16), milliseconds."""
    return FigureRef("training", f"{mode}_step_ms")


def training_tokens(mode: str) -> FigureRef:
    return FigureRef("training", f"{mode}_tokens_per_s")


def training_model_tflops(mode: str) -> FigureRef:
    """The model FLOPs per second of training in `mode` (llm.c's MFU arithmetic)."""
    return FigureRef("training", f"{mode}_model_tflops")


def training_speedup(fast: str, slow: str) -> FigureRef:
    """How many times faster a step trains in `fast` than in `slow`."""
    return FigureRef("training", f"speedup_{fast}_over_{slow}")


def allreduce_busbw(size_mib: int) -> FigureRef:
    """The bus bandwidth of an all-reduce of `size_mib` MiB (nccl-tests' formula)."""
    return FigureRef("allreduce", f"{size_mib}MiB")


def allreduce_latency(size_bytes: int) -> FigureRef:
    """The median time of one all-reduce of `size_bytes` bytes, microseconds."""
    name = f"{size_bytes // 1024}KiB" if size_bytes >= 1024 else f"{size_bytes}B"
    return FigureRef("allreduce_latency", name)


def node(reading: str) -> FigureRef:
    """A pre-flight reading of the node (`verify.preflight`)."""
    return FigureRef("node", reading)


def phase(name: str) -> FigureRef:
    """The wall time one phase of the run took, seconds."""
    return FigureRef("phases", name)


TRAINING_BF16_STEP = training_step_ms("bf16")
TRAINING_BF16_MODEL_TFLOPS = training_model_tflops("bf16")
SPEEDUP_BF16_OVER_FP32 = training_speedup("bf16", "fp32")
ALLREDUCE_1GIB = allreduce_busbw(1024)
ALLREDUCE_LATENCY_8B = allreduce_latency(8)
COLLECTIVES = FigureRef("allreduce", "collectives")  # null, with the reason the multi-GPU checks did not run
DEVICE_COPY = FigureRef("bandwidth", "device_copy")
HOST_COPY = FigureRef("bandwidth", "host_copy")
HOST_TO_DEVICE = FigureRef("bandwidth", "host_to_device")
DEVICE_TO_HOST = FigureRef("bandwidth", "device_to_host")
GEMM_BF16_SUSTAINED = gemm("bf16_sustained")
GRAPHS_BF16_REPLAY = FigureRef("graphs", "bf16_replay_step_ms")
GRAPHS_SPEEDUP = FigureRef("graphs", "speedup_replay_over_eager")
