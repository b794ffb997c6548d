"""Whether a base's certificate covers a team lock: it does when the team lock's CUDA-relevant packages (torch
and its CUDA libraries, cuDNN, NCCL, the CUDA runtime, Python) are exactly the base lock's, build for build,
since a certificate proves that stack on that hardware; any of them moved, and the team lock needs its own."""

from __future__ import annotations

import re

from lockgen.model.lock import Lock
from lockgen.model.names import normalize

CUDA_RELEVANT = re.compile(
    r"^(torch|pytorch|libtorch|triton|python|cuda-.*|nvidia-.*|libcu.*|cudnn|nccl|libnccl|"
    r"libcudnn.*|cudatoolkit|pytorch-cuda|cuda-toolkit|cuda-bindings)$"
)


def _cuda_stack(lock: Lock) -> dict[tuple[str, str], str]:
    return {
        (p.platform, normalize(p.name)): f"{p.version} {p.build or p.hash.sha256 or ''}".strip()
        for p in lock.package
        if CUDA_RELEVANT.match(normalize(p.name))
    }


def cuda_stack_changes(base: Lock, team: Lock) -> list[str]:
    """How the team lock's CUDA-relevant packages differ from the base lock's (empty: the base's
    certificates cover it)."""
    before, after = _cuda_stack(base), _cuda_stack(team)
    changes = []
    for platform, name in sorted(before.keys() | after.keys()):
        old, new = before.get((platform, name)), after.get((platform, name))
        if old != new:
            changes.append(f"{name} {old or '(none)'} -> {new or '(none)'} on {platform}")
    return changes
