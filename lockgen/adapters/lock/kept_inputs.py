"""Inputs checked once per bytes: the value the models accepted for a lock's exact bytes (and a stack's verdict that
its target's lock is fresh, by the stack's and the lock's bytes: `keep_fresh`; the targets detected for a stack, by
the stack's bytes, with what detection read of each node inside: `keep_detected`; and that a lock's text lockgen
made passed every field's rule, `lock_fields.check_lock`, by the text's bytes: `keep_checked_text`), kept under
`$LOCKGEN_HOME/kept/<kind>/<sha256 of the bytes>.json` in plain JSON, so a later command given the same bytes can
load what was checked without pydantic or the models (the fast path, `lockgen.cli.fast_path`), as git keeps its
index and uv its resolutions. A stack's spec is kept by its text's bytes too (`keep_spec`), and the packaged GPU
facts once (`gpu_facts`), as the JSON documents of their plain records, rebuilt without a validator
(`model.records`): a resolve of a stack read before validates neither again, and imports no pydantic.

What a kept value trusts: that the file under lockgen's home was written by lockgen, after the models accepted
the bytes whose sha256 names it, under the rules its record names (`kept_runs.rules_stamp`: lockgen's version and
the stat of every file of its package, the models, the rules and this module's readers among them). It is
written whole (a temporary file and a rename) or not at all, and read back only when its own record names the
same sha256, kind and rules: a value kept by another lockgen, or by this one before any of its files changed,
reads as not kept, and the bytes are parsed again (and the value kept again in its place). Keeping is
best-effort: a home lockgen cannot write keeps nothing, and every command still works. `LOCKGEN_REPARSE=1`, or
removing the `kept/` folder, makes every command parse every byte."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from lockgen.adapters.proof.kept_runs import REPARSE, kept_folder, rules_stamp, trusted
from lockgen.errors import LockgenError

__all__ = [
    "REPARSE",
    "KeptLock",
    "gpu_facts",
    "keep",
    "keep_checked_text",
    "keep_detected",
    "keep_fresh",
    "keep_lock",
    "keep_spec",
    "kept",
    "kept_checked_text",
    "kept_detected",
    "kept_fresh",
    "kept_lock",
    "kept_lock_value",
    "kept_spec",
    "trusted",
]

if TYPE_CHECKING:
    from lockgen.model.facts import GpuFacts
    from lockgen.model.lock import Lock
    from lockgen.model.spec import StackSpec

R = TypeVar("R")

Kind = Literal["lock", "stack", "node", "checked", "spec", "facts"]


def _path(kind: Kind, sha256: str) -> Path:
    return Path(kept_folder(kind, None)) / f"{sha256}.json"


def keep(
    kind: Kind, sha256: str, value: Callable[[], dict[str, Any]], readable: Callable[[dict[str, Any]], object]
) -> None:
    """Keeps what the models accepted for the bytes whose sha256 is `sha256` (`value()`, plain JSON values),
    unless a value its reader can read (`readable` of it is truthy) is kept already: one that cannot be read
    (damaged, or of another shape) is written again."""
    found = _value(kind, sha256)
    if found is None or not readable(found):
        _write(kind, sha256, value())


def _write(kind: Kind, sha256: str, value: dict[str, Any]) -> None:
    """Writes the record of `value` whole (a temporary file and a rename), or nothing."""
    from lockgen.adapters.atomic_files import write_bytes_atomic  # tempfile: only a command that keeps loads it

    path = _path(kind, sha256)
    record = {"kind": kind, "sha256": sha256, "rules": rules_stamp(), "value": value}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(path, json.dumps(record, sort_keys=True, separators=(",", ":")).encode())
    except (
        OSError,
        ValueError,
        LockgenError,
    ):  # a home lockgen cannot write (read-only, full, a folder there), a value JSON cannot hold
        pass  # nothing kept: the next command parses the bytes again


def kept(kind: Kind, sha256: str) -> dict[str, Any] | None:
    """The value kept for the bytes whose sha256 is `sha256`, None when none is kept (or kept values are off)."""
    return _value(kind, sha256) if trusted() else None


def _value(kind: Kind, sha256: str) -> dict[str, Any] | None:
    try:
        record = json.loads(_path(kind, sha256).read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or (record.get("kind"), record.get("sha256"), record.get("rules")) != (
        kind,
        sha256,
        rules_stamp(),
    ):
        return None
    value = record.get("value")
    return value if isinstance(value, dict) else None


@dataclass(frozen=True)
class KeptLock:
    """What the fast path reads of a kept lock: its recorded target ("" when it records none), its platforms, and
    whether it holds an editable local package (whose environment reads that package where the lock's folder is,
    so it is one environment per folder, not per lock bytes: `materialize_steps.store_prefix`)."""

    target: str
    platforms: tuple[str, ...]
    editable: bool = False


def keep_lock(sha256: str, lock: Lock) -> None:
    """Keeps a lock the models accepted: its checked value, its target (by `LockgenMeta`, the one reader of its
    keys) and its platforms."""

    def value() -> dict[str, Any]:
        from lockgen.core.lock.lock_builder import LockgenMeta, has_editable
        from lockgen.model.lock import lock_document

        facts = {
            "target": LockgenMeta(lock).target,
            "platforms": list(lock.metadata.platforms),
            "editable": has_editable(lock.package),
        }
        return {"lock": lock_document(lock), **facts}

    keep("lock", sha256, value, lambda kept: _lock_facts(kept) and isinstance(kept.get("lock"), dict))


def kept_lock(sha256: str) -> KeptLock | None:
    """The kept lock whose bytes' sha256 is `sha256`, None when none is kept (or its record is not of that shape)."""
    value = kept("lock", sha256)
    return None if value is None else _lock_facts(value)


def kept_lock_value(sha256: str) -> dict[str, Any] | None:
    """The lock value the models accepted for the bytes whose sha256 is `sha256` (`model.lock.lock_document`: plain
    JSON values), None when none is kept (or kept values are off, or its record is not of that shape)."""
    value = kept("lock", sha256)
    lock = None if value is None or _lock_facts(value) is None else value.get("lock")
    return lock if isinstance(lock, dict) else None


def _lock_facts(value: dict[str, Any]) -> KeptLock | None:
    target, platforms, editable = value.get("target"), value.get("platforms"), value.get("editable")
    if (
        not isinstance(target, str)
        or not isinstance(platforms, list)
        or not all(isinstance(p, str) for p in platforms)
        or not isinstance(editable, bool)
    ):
        return None
    return KeptLock(target, tuple(platforms), editable)


def keep_fresh(stack_key: str, target: str, lock_sha256: str, parents: list[tuple[str, str]]) -> None:
    """Keeps that the lock whose bytes' sha256 is `lock_sha256` was found fresh for `target` of the stack
    `stack_key` names (the sha256 of its file's absolute path and bytes), by what the stack states (`run`'s freshness
    check, issue 44), with the other files that check read (`parents`: a base lock's absolute path and the
    sha256 of the bytes read), so a later `run` of the same bytes need not parse the stack to know it."""
    keep(
        "stack",
        _fresh_key(stack_key, target, lock_sha256),
        lambda: {"parents": [list(parent) for parent in parents]},
        _parents,
    )


def kept_fresh(stack_key: str, target: str, lock_sha256: str) -> list[tuple[str, str]] | None:
    """The parents (path, sha256) of a kept fresh verdict for exactly these bytes and target; None when none is kept."""
    value = kept("stack", _fresh_key(stack_key, target, lock_sha256))
    return None if value is None else _parents(value)


def _fresh_key(stack_key: str, target: str, lock_sha256: str) -> str:
    return hashlib.sha256(f"{stack_key}\0{target}\0{lock_sha256}".encode("utf-8", "surrogateescape")).hexdigest()


def _parents(value: dict[str, Any]) -> list[tuple[str, str]] | None:
    parents = value.get("parents")
    if not isinstance(parents, list) or not all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(part, str) for part in p) for p in parents
    ):
        return None
    return [(p[0], p[1]) for p in parents]


_NODES_KEPT = 16  # detections kept per stack: the most recent nodes' (a home shared by unlike nodes)


def keep_detected(stack_key: str, node_key: str, target: str, said: str) -> None:
    """Keeps that detection chose `target` of the stack `stack_key` names (`run`'s: its file's absolute path and
    bytes) on the node whose inputs hash to `node_key` (`node_facts.node_key`), with the line it said of it (`said`),
    so a later `run` without `--target` of the same stack on the same node need not load the models to know it.
    Kept by the stack alone, the nodes inside the value (the 16 most recent): a stack with nothing kept is known
    without probing the node."""
    nodes = [[node, *found] for node, found in (_detected(_value("node", stack_key) or {}) or {}).items()]
    nodes = [entry for entry in nodes if entry[0] != node_key] + [[node_key, target, said]]  # the newest last
    keep(
        "node",
        stack_key,
        lambda: {"nodes": nodes[-_NODES_KEPT:]},  # a list: the kept JSON's keys are sorted, its lists keep order
        lambda value: (_detected(value) or {}).get(node_key) == (target, said),
    )


def kept_detected(stack_key: str) -> dict[str, tuple[str, str]]:
    """The target and line kept as detected for this stack, by node key (`node_facts.node_key`); empty when none
    is kept. The caller probes this node and takes its entry only once all else it needs is found kept."""
    value = kept("node", stack_key)
    return (_detected(value) if value is not None else None) or {}


def _detected(value: dict[str, Any]) -> dict[str, tuple[str, str]] | None:
    nodes = value.get("nodes")
    if not isinstance(nodes, list):
        return None
    found: dict[str, tuple[str, str]] = {}
    for entry in nodes:  # [node key, target, the line detection said], the oldest first
        if not (isinstance(entry, list) and len(entry) == 3 and all(isinstance(part, str) for part in entry)):
            return None
        if not entry[1]:
            return None
        found[entry[0]] = (entry[1], entry[2])
    return found


def keep_checked_text(sha256: str) -> None:
    """Keeps that the lock text whose bytes' sha256 is `sha256` passed `lock_fields.check_lock` (the rules are a
    function of the lock's value, and its text renders every field of it), so the next command making the same text
    (a resolve finding its locks unchanged) need not check it again (`lockfile_yaml.checked_lock_text`)."""
    keep("checked", sha256, lambda: {"checked": True}, _checked)


def kept_checked_text(sha256: str) -> bool:
    """Whether the lock text whose bytes' sha256 is `sha256` is kept as having passed every field's rule."""
    value = kept("checked", sha256)
    return value is not None and _checked(value)


def _checked(value: dict[str, Any]) -> bool:
    return value.get("checked") is True


def keep_spec(sha256: str, spec: StackSpec) -> None:
    """Keeps the spec the models accepted for a stack text whose bytes' sha256 is `sha256` (one that extends
    nothing, so its spec is a function of its text alone: `stack_file.read_stack`), so the next command reading the
    same bytes takes it without validating it again (`kept_spec`)."""
    _keep_record("spec", sha256, spec)


def kept_spec(sha256: str) -> StackSpec | None:
    """The spec kept for the stack text whose bytes' sha256 is `sha256`; None when none is kept."""
    from lockgen.model.spec import StackSpec

    return _kept_record("spec", sha256, StackSpec)


_PACKAGED_FACTS = hashlib.sha256(b"the packaged GPU facts").hexdigest()  # their bytes: bound by the rules' stamp


def gpu_facts() -> GpuFacts:
    """The GPU facts (`core.gpu.facts.load_facts`), the packaged ones validated once per lockgen install: they are a
    file of lockgen's package, so the rules' stamp a kept value names binds their stat, and they are kept under one
    key. Facts a `$LOCKGEN_FACTS` file states are read and validated by every command, as before."""
    from lockgen.core.gpu import facts, package_data

    if package_data.facts_overridden():  # an override, even one spelled as the packaged file's path
        return facts.load_facts()
    from lockgen.model.facts import GpuFacts

    found = _kept_record("facts", _PACKAGED_FACTS, GpuFacts)
    if found is not None and found.origin == package_data.PACKAGED_FACTS:
        facts.remember(found)
        return found
    loaded = facts.load_facts()
    _keep_record("facts", _PACKAGED_FACTS, loaded)
    return loaded


def _keep_record(kind: Kind, sha256: str, value: StackSpec | GpuFacts) -> None:
    """Keeps a value the boundary's validator accepted as its record's JSON document (`model.records`), for
    `_kept_record` to rebuild without a validator. Kept only when that document, read back as `_kept_record` reads
    it, rebuilds this very value: equal field for field and written alike (every table in the same order: the
    document is kept as its JSON text, whose keys the record's sorting leaves as they were), so what is taken later
    is what the validator accepted; a value its document does not rebuild is validated each time, as before. The
    record is read once, before the document is made: one kept already is left as it is, unless it is of another
    shape (then it is written again)."""
    from lockgen.model.records import record_document

    record: type[StackSpec | GpuFacts] = type(value)
    found = _value(kind, sha256)
    if found is not None and isinstance(found.get("record"), str):
        if _rebuilt_record(record, found["record"]) is not None:
            return
    try:
        document = json.dumps(record_document(value))
    except (TypeError, ValueError):  # a field JSON does not hold: validated each time
        return
    again = _rebuilt_record(record, document)
    if again is None or again != value or json.dumps(record_document(again)) != document:
        return
    _write(kind, sha256, {"record": document})


def _kept_record(kind: Kind, sha256: str, record: type[R]) -> R | None:
    value = kept(kind, sha256)
    if value is None or not isinstance(value.get("record"), str):
        return None
    return _rebuilt_record(record, value["record"])


def _rebuilt_record(record: type[R], document: str) -> R | None:
    """The record `document` (JSON text) is of, None where it is of another shape (it is parsed again)."""
    from lockgen.model.records import NotRebuilt, record_from_document

    try:
        return record_from_document(record, json.loads(document))
    except (NotRebuilt, ValueError, RecursionError):
        return None
