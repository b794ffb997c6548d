"""Freshness of a lock: compares what a lock records with what resolving now would record.

Checked, not hashed: each difference is reported as one typed reason, like pixi's unsat reasons.
"""

from __future__ import annotations

from collections.abc import Sequence
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


TARGET_FIELDS = ("arch", "driver", "glibc", "cuda", "cuda-compat", "allow-ptx-jit", "platforms")


def stale_reasons(target: str, lock: Lock, expected: LockMetadata) -> list[Staleness]:
    """Every typed reason `lock` differs from the metadata a fresh resolve would write; each names what
    changed (the request, the target field) where the lock records it, else the digest that differs."""
    have = lock.metadata.custom_metadata
    want = expected.custom_metadata
    reasons: list[Staleness] = []

    def differs(prefix: str) -> list[str]:
        keys = sorted({k for k in have if k.startswith(prefix)} | {k for k in want if k.startswith(prefix)})
        return [k for k in keys if have.get(k) != want.get(k)]

    def add(kind: str, keys: list[str], named: Sequence[str] = ()) -> None:
        if keys:
            names = "; ".join(named) if named else ", ".join(k.removeprefix("lockgen.") for k in keys)
            reasons.append(Staleness(target, kind, f"{REASONS[kind]} ({names})"))

    spec_keys = differs("lockgen.spec-digest") + differs("lockgen.pypi-digest")
    add("spec-changed", spec_keys, _changed_requests(lock.metadata, expected) if spec_keys else [])
    target_keys = differs("lockgen.target-digest")
    add("target-changed", target_keys,
        [_change(field, have.get(f"lockgen.{field}"), want.get(f"lockgen.{field}")) for field in TARGET_FIELDS
         if f"lockgen.{field}" in have and have.get(f"lockgen.{field}") != want.get(f"lockgen.{field}")])
    add("exclude-newer-changed", differs("lockgen.exclude-newer"),
        [_change("exclude-newer", have.get("lockgen.exclude-newer"), want.get("lockgen.exclude-newer"))])
    add("virtual-packages-changed", differs("lockgen.virtual-packages."))
    add("channel-index-changed", differs("lockgen.index."))
    if not reasons:
        add("arch-rules-changed", differs("lockgen.constraints."))
    return reasons


def _change(name: str, before: str | None, after: str | None) -> str:
    if before is None:
        return f"{name} added: {after}"
    if after is None:
        return f"{name} removed (was {before})"
    return f"{name}: {before or '(none)'} -> {after or '(none)'}"


def _changed_requests(have: LockMetadata, want: LockMetadata) -> list[str]:
    """The requests and channels that differ, by name (empty for a lock older than the named keys)."""
    prefix = "lockgen.requested."
    if not any(k.startswith(prefix) for k in have.custom_metadata):
        return []
    old = {k.removeprefix(prefix): v for k, v in have.custom_metadata.items() if k.startswith(prefix)}
    new = {k.removeprefix(prefix): v for k, v in want.custom_metadata.items() if k.startswith(prefix)}
    named = [_change(key.replace("conda.", "", 1).replace("pypi.", "pypi ", 1), old.get(key), new.get(key))
             for key in sorted(old.keys() | new.keys()) if old.get(key) != new.get(key)]
    before, after = [c.url for c in have.channels], [c.url for c in want.channels]
    if before != after:
        named.append(_change("channels", " ".join(before), " ".join(after)))
    return named
