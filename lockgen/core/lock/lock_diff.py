"""Compares two locks per platform: added, removed and changed packages, CUDA stack first."""

from __future__ import annotations

from dataclasses import dataclass, field

from lockgen.model.lock import Lock, LockedPackage

CUDA_STACK_PREFIXES = (
    "pytorch",
    "libtorch",
    "torch",
    "cuda",
    "cudnn",
    "nccl",
    "libcu",
    "libnv",
    "nvidia-",
    "cudatoolkit",
    "triton",
)


def is_cuda_stack(name: str) -> bool:
    return name.startswith(CUDA_STACK_PREFIXES)


@dataclass(frozen=True)
class Change:
    platform: str
    name: str
    kind: str  # added | removed | changed
    old: str
    new: str

    def line(self) -> str:
        marker = {"added": "+", "removed": "-", "changed": "~"}[self.kind]
        text = {"added": self.new, "removed": self.old, "changed": f"{self.old} -> {self.new}"}[self.kind]
        return f"{marker} {self.platform} {self.name} {text}"


@dataclass(frozen=True)
class LockDiff:
    changes: list[Change] = field(default_factory=list)
    platforms_only_in_a: list[str] = field(default_factory=list)
    platforms_only_in_b: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.changes or self.platforms_only_in_a or self.platforms_only_in_b)


def _label(package: LockedPackage) -> str:
    return f"{package.version} {package.build}" if package.build else package.version


def diff_locks(a: Lock, b: Lock) -> LockDiff:
    """What changes from lock `a` to lock `b`, sorted CUDA stack first, then by platform and name."""
    platforms_a, platforms_b = set(a.metadata.platforms), set(b.metadata.platforms)
    changes: list[Change] = []
    for platform in sorted(platforms_a & platforms_b):
        old = {(p.manager, p.name): p for p in a.packages_for(platform)}
        new = {(p.manager, p.name): p for p in b.packages_for(platform)}
        for key in sorted(old.keys() | new.keys()):
            name = key[1]
            if key not in new:
                changes.append(Change(platform, name, "removed", _label(old[key]), ""))
            elif key not in old:
                changes.append(Change(platform, name, "added", "", _label(new[key])))
            elif _label(old[key]) != _label(new[key]) or old[key].hash != new[key].hash:
                changes.append(Change(platform, name, "changed", _label(old[key]), _label(new[key])))
    changes.sort(key=lambda c: (not is_cuda_stack(c.name), c.platform, c.name))
    return LockDiff(changes, sorted(platforms_a - platforms_b), sorted(platforms_b - platforms_a))
