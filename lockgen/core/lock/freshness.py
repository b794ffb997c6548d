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
    "facts-changed": "the torch releases the facts and the index's evidence admit changed",
    "base-changed": "the base lock the team's lock was held to changed",
    "local-changed": "a local package changed since the lock was made (a built one's source tree, an editable one's "
    "pyproject.toml)",
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
    add(
        "target-changed",
        target_keys,
        [
            _change(field, have.get(f"lockgen.{field}"), want.get(f"lockgen.{field}"))
            for field in TARGET_FIELDS
            if f"lockgen.{field}" in have and have.get(f"lockgen.{field}") != want.get(f"lockgen.{field}")
        ],
    )
    cutoffs = differs("lockgen.exclude-newer") + differs("lockgen.pypi-exclude-newer")
    add(
        "exclude-newer-changed",
        cutoffs,
        [
            _change(key.removeprefix("lockgen.").replace("pypi-", "PyPI ", 1), have.get(key), want.get(key))
            for key in cutoffs
        ],
    )
    add("virtual-packages-changed", differs("lockgen.virtual-packages."))
    add("channel-index-changed", differs("lockgen.index."))
    add(
        "base-changed",
        differs("lockgen.base-lock"),
        [
            _change(
                "base lock",
                (have.get("lockgen.base-lock") or "")[:12] or None,
                (want.get("lockgen.base-lock") or "")[:12] or None,
            )
        ],
    )
    if not reasons:
        add("arch-rules-changed", differs("lockgen.constraints."))
    return reasons


STATED = (
    "spec-changed",
    "target-changed",
    "exclude-newer-changed",
    "base-changed",
    "local-changed",
)  # what the stack's own folder says


def local_changed(target: str, details: Sequence[str]) -> list[Staleness]:
    """`local-changed`, naming each local package whose folder no longer matches its lock entry (`details`)."""
    return [Staleness(target, "local-changed", f"{REASONS['local-changed']} ({'; '.join(details)})")] if details else []


def stated_reasons(target: str, lock: Lock, expected: LockMetadata) -> list[Staleness]:
    """The reasons of `stale_reasons` that the stack's own text decides (its requests, channels, target,
    cut-offs and base lock), from the digests the lock keeps: no channel index, facts or solve is read, so it
    takes milliseconds; what `run`, `shell` and `activate` check of a stack's lock before they use it."""
    return [reason for reason in stale_reasons(target, lock, expected) if reason.kind in STATED]


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
    named = [
        _change(key.replace("conda.", "", 1).replace("pypi.", "pypi ", 1), old.get(key), new.get(key))
        for key in sorted(old.keys() | new.keys())
        if old.get(key) != new.get(key)
    ]
    before, after = [c.url for c in have.channels], [c.url for c in want.channels]
    if before != after:
        named.append(_change("channels", " ".join(before), " ".join(after)))
    if have.custom_metadata.get("lockgen.image") != want.custom_metadata.get("lockgen.image"):
        named.append("[image] settings changed")
    return named


def facts_changed(
    target: str, platform: str, lock: Lock, constraints: tuple[str, ...], notes: tuple[str, ...]
) -> list[Staleness]:
    """A `facts-changed` reason when the torch releases a resolve would admit now (newer facts, or releases
    the index published since) are not those the lock was resolved with; it names them and the evidence."""
    have = lock.metadata.custom_metadata
    recorded = [
        c for c in (have.get(f"lockgen.pypi-constraints.{platform}") or "").split("; ") if c.startswith("torch")
    ]
    wanted = [c for c in constraints if c.startswith("torch")]
    if recorded == wanted:
        return []
    before, after = _admitted(recorded), _admitted(wanted)
    if before == after:  # the same releases in the same range: the lock's choice cannot change
        return []
    moved = [f"now admitted: {', '.join(sorted(after - before, key=_key))}"] if after - before else []
    moved += [f"no longer admitted: {', '.join(sorted(before - after, key=_key))}"] if before - after else []
    seen = set((have.get(f"lockgen.newer-releases.{platform}") or "").split(" | "))
    news = [n for n in notes if n not in seen]
    detail = f"{REASONS['facts-changed']} on {platform} ({'; '.join(moved)})"
    return [Staleness(target, "facts-changed", detail + (f"; {news[0]}" if news else ""))]


def _key(release: str) -> tuple[int, ...]:
    return tuple(int(part) for part in release.split("."))


def _admitted(constraints: list[str]) -> set[str]:
    """The minor releases a `torch>=A.B,<C.D,!=E.F.*` constraint admits."""
    if not constraints:
        return set()
    clauses = constraints[0].removeprefix("torch").split(",")
    low = next((_key(c[2:]) for c in clauses if c.startswith(">=")), (0, 0))
    high = next((_key(c[1:]) for c in clauses if c.startswith("<")), (0, 0))
    excluded = {c[2:].removesuffix(".*") for c in clauses if c.startswith("!=")}
    found = set()
    for major in range(low[0], high[0] + 1):
        for minor in range(low[1] if major == low[0] else 0, (high[1] if major == high[0] else 100)):
            if f"{major}.{minor}" not in excluded:
                found.add(f"{major}.{minor}")
    return found
