"""Freshness of a lock: compares what a lock records with what resolving now would record.

Checked, not hashed: each difference is reported as one typed reason, like pixi's unsat reasons.
"""

from __future__ import annotations

from dataclasses import dataclass

from lockgen.model.lock import Lock, LockMetadata

REASONS = {
    "target-missing": "no lock for this target",
    "spec-changed": "dependencies or channels changed",
    "target-changed": "the target's arch, driver, platforms or options changed",
    "virtual-packages-changed": "the target's virtual packages changed",
    "arch-rules-changed": "the arch rules admit other conda builds (facts or channel builds changed)",
    "channel-index-changed": "a channel index changed",
    "exclude-newer-changed": "exclude-newer changed",
}


@dataclass(frozen=True)
class Staleness:
    """One reason a target's lock is stale."""

    target: str
    kind: str
    detail: str

    def line(self) -> str:
        return f"{self.target}: {self.kind}: {self.detail}"


def stale_reasons(target: str, lock: Lock, expected: LockMetadata) -> list[Staleness]:
    """Every typed reason `lock` differs from the metadata a fresh resolve would write."""
    have = lock.metadata.custom_metadata
    want = expected.custom_metadata
    reasons: list[Staleness] = []

    def differs(prefix: str) -> list[str]:
        keys = sorted({k for k in have if k.startswith(prefix)} | {k for k in want if k.startswith(prefix)})
        return [k for k in keys if have.get(k) != want.get(k)]

    def add(kind: str, keys: list[str]) -> None:
        if keys:
            names = ", ".join(k.removeprefix("lockgen.") for k in keys)
            reasons.append(Staleness(target, kind, f"{REASONS[kind]} ({names})"))

    add("spec-changed", differs("lockgen.spec-digest") + differs("lockgen.pypi-digest"))
    add("target-changed", differs("lockgen.target-digest"))
    add("exclude-newer-changed", differs("lockgen.exclude-newer"))
    add("virtual-packages-changed", differs("lockgen.virtual-packages."))
    add("channel-index-changed", differs("lockgen.index."))
    if not reasons:
        add("arch-rules-changed", differs("lockgen.constraints."))
    return reasons
