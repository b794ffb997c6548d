"""Verification results and certificates: the kernel's JSON as validated models, and the signed certificate."""

from __future__ import annotations

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
