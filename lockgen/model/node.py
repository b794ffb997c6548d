"""A node's facts as `lockgen detect` matches them against a stack's targets: its conda platform, glibc,
NVIDIA driver and GPUs (each by its compute capability). Probed on the node, or stated in a file
(`LOCKGEN_NODE_FACTS`, `detect --node`) for tests and dry runs; either way validated here."""

from __future__ import annotations

import re

from pydantic import field_validator, model_validator

from lockgen.model.base import Frozen
from lockgen.model.checked import DriverVersion, GlibcVersion

_PLATFORM = re.compile(r"^[a-z0-9]+-[a-z0-9_]+$")
_COMPUTE_CAPABILITY = re.compile(r"^\d{1,2}\.\d{1,2}$")
_GPU_NAME = re.compile(r"^[\x20-\x7e]{1,200}$")


class NodeGpu(Frozen):
    """One GPU: its name (as nvidia-smi says it) and compute capability (`9.0`)."""

    name: str
    compute_capability: str

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        if not _GPU_NAME.fullmatch(value):
            raise ValueError("a GPU name is 1 to 200 printable ASCII characters")
        return value

    @field_validator("compute_capability")
    @classmethod
    def _valid_capability(cls, value: str) -> str:
        if not _COMPUTE_CAPABILITY.fullmatch(value):
            raise ValueError(f"compute capability `{value}` must be a major.minor like `9.0`")
        return value

    @property
    def arch(self) -> str:
        """The arch lockgen names this GPU's kernels by (`9.0` -> `sm90`, `10.0` -> `sm100`)."""
        major, minor = self.compute_capability.split(".")
        return f"sm{int(major)}{int(minor)}"


class NodeFacts(Frozen):
    """What a target is matched on. `glibc` is None where the C library is not glibc (musl); `driver` is
    None on a node without an NVIDIA driver, which then has no GPUs."""

    platform: str
    glibc: GlibcVersion | None = None
    driver: DriverVersion | None = None
    gpus: tuple[NodeGpu, ...] = ()

    @field_validator("platform")
    @classmethod
    def _valid_platform(cls, value: str) -> str:
        if not _PLATFORM.fullmatch(value):
            raise ValueError(f"platform `{value}` must be a conda platform like `linux-64`")
        return value

    @model_validator(mode="after")
    def _gpus_need_a_driver(self) -> "NodeFacts":
        if self.gpus and self.driver is None:
            raise ValueError("a node with GPUs has a driver: state `driver`")
        return self
