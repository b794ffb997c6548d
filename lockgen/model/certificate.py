"""Verification results and certificates: the kernel's JSON as validated models, and the signed certificate.

The checks and figures mirror the kernel's own records (`verify/schema.py`, the standard library alone, where
they are defined): the same fields, types and defaults, which `tests/test_cert_schema.py` holds equal field for
field, so a figure the kernel writes is one this model reads and writes back byte for byte (a field left None
is left out of the JSON, but a figure's `value`). Every record of a certificate takes its JSON types exactly:
no text read as a number, no `"yes"` or 1 as true (a signature proves who wrote the bytes, not that they are a
certificate)."""

from __future__ import annotations

import math
from typing import Annotated, Literal, TypedDict

from pydantic import SerializerFunctionWrapHandler, Strict, StringConstraints, field_validator, model_serializer

from lockgen.model.base import Frozen
from lockgen.model.certificate_time import CREATED_PATTERN
from lockgen.model.json_values import JsonObject
from verify.schema import FigureRef

CERTIFICATE_SCHEMA = "lockgen.certificate/1"
KERNEL_SCHEMA = "lockgen.verify/1"


# the JSON types exactly, in every record of a certificate: no text read as a number, no number as text,
# no true as 1, no "yes" as true
Number = Annotated[float, Strict()]
Count = Annotated[int, Strict()]
Text = Annotated[str, Strict()]
Flag = Annotated[bool, Strict()]
Created = Annotated[str, Strict(), StringConstraints(pattern=CREATED_PATTERN)]  # `certificate_time`'s one rule


class Check(Frozen):
    """One pass/fail judgement with the reason, and the measured value when there is one."""

    category: Text
    name: Text
    passed: Flag
    detail: Text
    value: Number | None = None

    def line(self) -> str:
        return f"{'ok  ' if self.passed else 'FAIL'} {self.category}/{self.name}: {self.detail}"


class _Written(Frozen):
    """A mirrored record of the kernel's: a field left None is left out of its JSON, but a figure's `value`
    (null: the figure did not run), as `verify.schema.as_json` writes it."""

    @model_serializer(mode="wrap")
    def _without_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        written: dict[str, object] = handler(self)
        return {name: value for name, value in written.items() if value is not None or name == "value"}


class Spread(_Written):
    """The least, greatest and mean of one quantity's samples."""

    min: Number
    max: Number
    mean: Number


class GpuDuring(_Written):
    """One GPU's samples during a phase: utilisation, power, temperature, clocks, and the clock limits seen."""

    util: Spread | None = None
    power_w: Spread | None = None
    temp_c: Spread | None = None
    sm_mhz: Spread | None = None
    mem_mhz: Spread | None = None
    clock_limits_seen: tuple[Text, ...] | None = None


class CudnnChoice(_Written):
    """cuDNN's switches during the convolution figures, and the fault that stood in for a bad stack if any."""

    enabled: Flag
    benchmark: Flag
    deterministic: Flag
    fault: Text | None = None


class KernelShare(_Written):
    """A GPU kernel by name and its share of one step's GPU time."""

    kernel: Text
    share: Number


class Figure(_Written):
    """One measured number with its unit (`value` None: not run, and `reason` says why), and what it was
    measured on (`verify.schema.Figure` says each field)."""

    value: Number | None
    unit: Text
    reason: Text | None = None
    size: Count | None = None
    products: Count | None = None
    bytes: Count | None = None
    total_gib: Number | None = None
    batch: Count | None = None
    sequence: Count | None = None
    channels: Count | None = None
    side: Count | None = None
    blocks: Count | None = None
    steps: Count | None = None
    params_m: Number | None = None
    bursts: tuple[Number, ...] | None = None
    steps_ms: tuple[Number, ...] | None = None
    batches_us: tuple[Number, ...] | None = None
    host_issue_ms: Number | None = None
    eager_step_ms: Number | None = None
    algbw: Number | None = None
    time_us: Number | None = None
    gpu: GpuDuring | None = None
    cudnn: CudnnChoice | None = None
    kernels: tuple[KernelShare, ...] | None = None


Figures = dict[str, dict[str, Figure]]  # by group, then name: `verify.schema.FigureRef` names one


class FigureReading(TypedDict):
    """A figure's value and unit alone: what a comparison reads, and what a fleet's kept facts hold per figure."""

    value: float | None
    unit: str


FigureReadings = dict[str, dict[str, FigureReading]]


def readings(figures: Figures, leave_out: frozenset[str] = frozenset()) -> FigureReadings:
    """The value and unit of every figure, by group and name, but the groups `leave_out` names."""
    return {
        group: {name: {"value": figure.value, "unit": figure.unit} for name, figure in entries.items()}
        for group, entries in figures.items()
        if group not in leave_out
    }


def comparable_values(figures: object) -> object:
    """Refuses, before the figures are read as records, a figure whose value is neither null (not run) nor a finite
    number (NaN, inf, past a float's range, text, true), or whose unit is not text, by its group and name: a
    comparison would pass it silently or fail on it. What is not of the figures' shape is left to the records'
    own validation."""
    groups = figures.items() if isinstance(figures, dict) else ()
    for group, entries in groups:
        for name, figure in entries.items() if isinstance(entries, dict) else ():
            if not isinstance(figure, dict):
                continue
            value, unit = figure.get("value"), figure.get("unit", "")
            if not isinstance(unit, str):
                raise ValueError(f"figure {group}/{name} has unit {str(unit)[:40]!r}, not text")
            if value is not None and not _finite_number(value):
                raise ValueError(f"figure {group}/{name} is {str(value)[:40]!r}, not a finite number")
    return figures


def _finite_number(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer past a float's range (10**400)
        return False


def figure_at(figures: Figures, ref: FigureRef) -> Figure | None:
    """The figure `ref` names in `figures`, None when the run has none."""
    return figures.get(ref.group, {}).get(ref.name)


class KernelNumerics(Frozen):
    """The fingerprint as the kernel wrote it (`verify.numerics`): lockgen adds the driver and the environment."""

    work: Text
    device: Text
    versions: dict[Text, Text | None]
    digests: dict[Text, Text]
    seconds: Number


class KernelReport(Frozen):
    """What `python -m verify` (kind `single`) or `python -m verify.dist` (kind `distributed`) printed."""

    schema_: Text
    kind: Text
    checks: tuple[Check, ...]
    figures: Figures
    telemetry: JsonObject
    duration_s: Number
    arch: Text | None = None
    mode: Text | None = None
    device: Text | None = None
    stack: JsonObject | None = None
    expected: JsonObject | None = None
    passed: Flag | None = None
    world_size: Count | None = None
    backend: Text | None = None
    nodes: Count | None = None
    node_rank: Count | None = None
    numerics: KernelNumerics | None = None

    _finite = field_validator("figures", mode="before")(comparable_values)

    @classmethod
    def from_json(cls, data: JsonObject) -> "KernelReport":
        data = dict(data)
        data["schema_"] = data.pop("schema", None)
        return cls.model_validate(data)


class ProvenConformance(_Written):
    """The environment proven to be the lock, from its packages' own manifests (`check --lock`'s counts)."""

    clean: Flag
    expected_digest: Text
    platform: Text
    packages: Count
    files_expected: Count
    files_observed: Count
    accepted_by_rule: Count
    checked_at: Text
    allowed_foreign: dict[Text, Text | None]  # foreign files accepted by name -> the sha256 found
    by_path_only: Count | None = None  # files checked present, not by content (absent from older certificates)


class Subject(Frozen):
    """What the certificate covers: the lock, the environment and the image, by digest."""

    stack: Text | None = None
    target: Text | None = None
    lock_path: Text | None = None
    lock_sha256: Text | None = None
    environment_digest: Text | None = None
    image_digest: Text | None = None
    python: Text
    conformance: ProvenConformance | None = None  # with a lock: the environment proven to be it, from its packages


class Hardware(Frozen):
    """The machine's fingerprint as the host saw it (nvidia-smi) and the kernel confirmed (NVML, torch)."""

    gpu_names: tuple[Text, ...]
    gpu_count: Count
    compute_capability: Text | None
    driver: Text | None
    interconnect: Text
    topology: Text
    host_platform: Text


class DistributedRun(Frozen):
    """How the multi-GPU checks ran: ranks in all, nodes, and this node's place among them."""

    world_size: Count
    nodes: Count = 1
    node_rank: Count = 0
    backend: Text | None = None
    rendezvous: Text | None = None


class NumericsKey(Frozen):
    """What must be equal for two nodes' numerics fingerprints to be compared: the device (the GPU model, or on
    CPUs the processor and the instruction set torch chose), the driver, the environment by digest, the
    versions of torch, CUDA, cuDNN and cuBLAS the process loaded, and the work that was digested."""

    device: Text
    driver: Text | None = None
    environment_digest: Text | None = None
    torch: Text | None = None
    cuda: Text | None = None
    cudnn: Text | None = None
    cublas: Text | None = None
    work: Text


class Numerics(Frozen):
    """The numerics fingerprint: the SHA-256 of each piece of deterministic work's output bits (`verify.numerics`),
    under the key nodes must share to be compared."""

    key: NumericsKey
    digests: dict[Text, Text]


class CertificateBody(Frozen):
    """Everything a certificate attests; its canonical JSON is what gets signed."""

    schema_: Text = CERTIFICATE_SCHEMA
    created: Created
    tool: Text
    arch: Text
    mode: Text
    subject: Subject
    hardware: Hardware
    stack: JsonObject
    checks: tuple[Check, ...]
    figures: Figures
    telemetry: JsonObject
    kernel_sha256: dict[Text, Text]
    passed: Flag
    duration_s: Number
    distributed: DistributedRun | None = None
    numerics: Numerics | None = None

    _finite = field_validator("figures", mode="before")(comparable_values)

    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]


class Signature(Frozen):
    """Who signed a certificate (the first 16 hex digits of the sha256 of the Ed25519 public key) and the signature,
    base64; `signed` says what it is over: `file-bytes`, the file's bytes from its first to the body's last (what
    `lockgen verify --key` writes), or absent, the body's canonical JSON (certificates written before)."""

    algorithm: Text
    key_id: Text
    value: Text
    signed: Literal["file-bytes"] | None = None


class Certificate(Frozen):
    """A certificate file: the body and, when a key was given, its Ed25519 signature."""

    certificate: CertificateBody
    signature: Signature | None = None
