"""Verification results and certificates: the kernel's JSON as validated models, and the signed certificate."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lockgen.model.base import Frozen

CERTIFICATE_SCHEMA = "lockgen.certificate/1"
KERNEL_SCHEMA = "lockgen.verify/1"


class Check(Frozen):
    """One pass/fail judgement with the reason, and the measured value when there is one."""

    category: str
    name: str
    passed: bool
    detail: str
    value: float | None = None

    def line(self) -> str:
        return f"{'ok  ' if self.passed else 'FAIL'} {self.category}/{self.name}: {self.detail}"


class KernelNumerics(Frozen):
    """The fingerprint as the kernel wrote it (`verify.numerics`): lockgen adds the driver and the environment."""

    work: str
    device: str
    versions: dict[str, str | None]
    digests: dict[str, str]
    seconds: float


class KernelReport(Frozen):
    """What `python -m verify` (kind `single`) or `python -m verify.dist` (kind `distributed`) printed."""

    schema_: str
    kind: str
    checks: tuple[Check, ...]
    figures: dict[str, dict[str, dict[str, Any]]]
    telemetry: dict[str, Any]
    duration_s: float
    arch: str | None = None
    mode: str | None = None
    device: str | None = None
    stack: dict[str, Any] | None = None
    expected: dict[str, Any] | None = None
    passed: bool | None = None
    world_size: int | None = None
    backend: str | None = None
    nodes: int | None = None
    node_rank: int | None = None
    numerics: KernelNumerics | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "KernelReport":
        data = dict(data)
        data["schema_"] = data.pop("schema", None)
        return cls.model_validate(data)


class Subject(Frozen):
    """What the certificate covers: the lock, the environment and the image, by digest."""

    stack: str | None = None
    target: str | None = None
    lock_path: str | None = None
    lock_sha256: str | None = None
    environment_digest: str | None = None
    image_digest: str | None = None
    python: str
    conformance: dict[str, Any] | None = None  # with a lock: the environment proven to be it, from its packages


class Hardware(Frozen):
    """The machine's fingerprint as the host saw it (nvidia-smi) and the kernel confirmed (NVML, torch)."""

    gpu_names: tuple[str, ...]
    gpu_count: int
    compute_capability: str | None
    driver: str | None
    interconnect: str
    topology: str
    host_platform: str


class DistributedRun(Frozen):
    """How the multi-GPU checks ran: ranks in all, nodes, and this node's place among them."""

    world_size: int
    nodes: int = 1
    node_rank: int = 0
    backend: str | None = None
    rendezvous: str | None = None


def digests_text(names: Sequence[str]) -> str:
    """`digest gemm_tf32 differs` or `digests gemm_tf32, conv_bf16 differ`: how the fingerprints' difference is said."""
    return f"digest {names[0]} differs" if len(names) == 1 else f"digests {', '.join(names)} differ"


class NumericsKey(Frozen):
    """What must be equal for two nodes' numerics fingerprints to be compared: the device (the GPU model, or on
    CPUs the processor and the instruction set torch chose), the driver, the environment by digest, the
    versions of torch, CUDA, cuDNN and cuBLAS the process loaded, and the work that was digested."""

    device: str
    driver: str | None = None
    environment_digest: str | None = None
    torch: str | None = None
    cuda: str | None = None
    cudnn: str | None = None
    cublas: str | None = None
    work: str


class Numerics(Frozen):
    """The numerics fingerprint: the SHA-256 of each piece of deterministic work's output bits (`verify.numerics`),
    under the key nodes must share to be compared."""

    key: NumericsKey
    digests: dict[str, str]


class CertificateBody(Frozen):
    """Everything a certificate attests; its canonical JSON is what gets signed."""

    schema_: str = CERTIFICATE_SCHEMA
    created: str
    tool: str
    arch: str
    mode: str
    subject: Subject
    hardware: Hardware
    stack: dict[str, Any]
    checks: tuple[Check, ...]
    figures: dict[str, dict[str, dict[str, Any]]]
    telemetry: dict[str, Any]
    kernel_sha256: dict[str, str]
    passed: bool
    duration_s: float
    distributed: DistributedRun | None = None
    numerics: Numerics | None = None

    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]


class Signature(Frozen):
    algorithm: str
    key_id: str
    value: str


class Certificate(Frozen):
    """A certificate file: the body and, when a key was given, its Ed25519 signature."""

    certificate: CertificateBody
    signature: Signature | None = None
