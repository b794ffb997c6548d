"""Numerics fingerprints compared, pure: which node computes different bits from the others of its key (the
same GPU model, driver, environment and library versions: `NumericsKey`), which digests differ, and the
likely cause, in order: a setting that differs from the nodes it is compared with (NVIDIA_TF32_OVERRIDE=0
changes the TF32 product's bits), a library from outside the environment, software the key cannot tell apart
(an environment without a digest), else the hardware itself (silent data corruption).

A node is judged against the majority of its key's nodes, digest by digest; where no digest value has a
majority (two nodes, say) every node in dispute is named, and a pinned reference (`verify --expect-numerics`)
judges a node alone."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import Protocol

from lockgen.model.certificate import (
    CertificateBody,
    Check,
    Hardware,
    KernelNumerics,
    Numerics,
    NumericsKey,
    digests_text,
)
from lockgen.model.json_values import JsonObject, list_at, object_at
from lockgen.model.names import shown

UNCOMPARED_SETTINGS = (
    "PYTHONPATH",
    "CUDA_VISIBLE_DEVICES",
)  # where the kernel was found and which GPU it ran on: not numerics
NUMERIC_SETTINGS = (
    "NVIDIA_TF32_OVERRIDE",
    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
    "TORCH_BLAS_PREFER_CUBLASLT",
    "CUBLASLT_",
    "CUBLAS_",
    "CUDNN_",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
)


def numerics_of(found: KernelNumerics | None, hardware: Hardware, environment_digest: str | None) -> Numerics | None:
    """The certificate's fingerprint from the kernel's, keyed by what nodes must share to compare it."""
    if found is None:
        return None
    versions = found.versions
    key = NumericsKey(
        device=found.device,
        driver=hardware.driver,
        environment_digest=environment_digest,
        torch=versions.get("torch"),
        cuda=versions.get("cuda"),
        cudnn=versions.get("cudnn"),
        cublas=versions.get("cublas"),
        work=found.work,
    )
    return Numerics(key=key, digests=dict(found.digests))


def key_text(key: NumericsKey) -> str:
    """The key in one line: the device, the driver, the environment and the versions that were recorded."""
    parts = [key.device] + [
        f"{name} {value}"
        for name, value in (
            ("driver", key.driver),
            ("torch", key.torch),
            ("CUDA", key.cuda),
            ("cuDNN", key.cudnn),
            ("cuBLAS", key.cublas),
        )
        if value
    ]
    parts.append(f"environment {key.environment_digest[:12]}" if key.environment_digest else "no environment digest")
    return ", ".join(parts)


def key_differences(first: NumericsKey, second: NumericsKey) -> list[str]:
    """`name: A vs B` for each part of the key the two differ in."""
    a, b = first.model_dump(), second.model_dump()
    return [f"{name}: {a[name]} vs {b[name]}" for name in a if a[name] != b[name]]


def differing_digests(mine: dict[str, str], theirs: dict[str, str]) -> tuple[str, ...]:
    """The digests two fingerprints of one key disagree on (one missing from either counts)."""
    return tuple(name for name in sorted(set(mine) | set(theirs)) if mine.get(name) != theirs.get(name))


def _settings(stack: JsonObject) -> dict[str, str]:
    settings = stack.get("settings") or {}
    return (
        {str(name): str(value) for name, value in settings.items() if name not in UNCOMPARED_SETTINGS}
        if isinstance(settings, dict)
        else {}
    )


def _foreign(stack: JsonObject) -> list[str]:
    return [str(path) for path in list_at(object_at(stack, "libraries"), "foreign")]


def _setting_differences(mine: dict[str, str], theirs: list[dict[str, str]]) -> list[str]:
    """`NAME=VALUE here, unset on the others` for each variable this node and its peers do not share, those known
    to change numerics (`NUMERIC_SETTINGS`) first: a JIT cache's folder set on some nodes is no cause beside them."""
    said = []
    names = set(mine) | {name for other in theirs for name in other}
    for name in sorted(names, key=lambda name: (not name.startswith(NUMERIC_SETTINGS), name)):
        value, others = mine.get(name), [other.get(name) for other in theirs]
        differing = [other for other in others if other != value]
        if not differing:
            continue
        here = f"{name} unset" if value is None else f"{name}={value}"
        there = " or ".join(sorted({"unset" if other is None else f"{name}={other}" for other in differing}))
        said.append(f"{here} here, {there} on {'the others' if len(differing) == len(others) else 'some others'}")
    return said


def likely_cause(stack: JsonObject, numerics: Numerics, peers: Sequence[JsonObject]) -> str:
    """Why the node of `stack` (the kernel's) and `numerics` computes other bits than `peers` (the stacks of the
    certificates it is compared with; none when a bare reference judges it), most likely first."""
    mine = _settings(stack)
    peers = list(
        {id(peer): peer for peer in peers}.values()
    )  # a fleet's rows share one stack among nodes alike: what differs is said of the distinct ones
    if peers:
        said = _setting_differences(mine, [_settings(stack) for stack in peers])
        if said:
            return f"a setting differs: {'; '.join(said[:3])}"
    else:
        numeric = [f"{name}={value}" for name, value in mine.items() if name.startswith(NUMERIC_SETTINGS)]
        if numeric:
            return f"a setting that changes numerics is set: {', '.join(numeric[:3])}"
    foreign = _foreign(stack)
    if foreign and not any(_foreign(other) == foreign for other in peers):
        return f"libraries from outside the environment were loaded: {', '.join(foreign[:3])}"
    if numerics.key.environment_digest is None:
        return (
            "other software cannot be ruled out: the environment has no digest (certify with --lock to pin it); else "
            "the hardware"
        )
    return (
        "the same software, settings and libraries: suspect the hardware (silent data corruption); drain the node "
        "and run the vendor's diagnostics"
    )


@dataclass(frozen=True)
class NumericsDifference:
    """A node whose bits differ: which digests, from whom, and the likely cause."""

    node: str
    key: NumericsKey
    digests: tuple[str, ...]
    against: str  # "the 3 other nodes of its key", "no majority among 2 nodes", "the reference"
    cause: str

    def as_json(self) -> dict[str, object]:
        return {
            "node": self.node,
            "key": self.key.model_dump(),
            "digests": list(self.digests),
            "against": self.against,
            "cause": self.cause,
        }


class Fingerprinted(Protocol):
    """What a node's comparison reads of its latest certificate (a `CertificateBody`, or a fleet status row
    that kept only this): the fingerprint and the kernel's stack (its settings and foreign libraries)."""

    @property
    def numerics(self) -> Numerics | None: ...

    @property
    def stack(self) -> JsonObject: ...


@dataclass(frozen=True)
class CountedFingerprint:
    """A fingerprint and a kernel stack's cause evidence that `nodes` nodes' latest certificates share: what a
    fleet's comparison holds instead of its nodes (10,000 nodes, a handful of these)."""

    numerics: Numerics
    stack: JsonObject
    nodes: int


Member = tuple[str, int]  # (node, the index of its counted fingerprint)


class OddFingerprints:
    """Counted fingerprints judged against their key's majority, digest by digest: which of them are named
    (outvoted on some digest, or of a key where some digest has no majority), and how many nodes were compared
    (those sharing a key with another). Only the nodes of the named ones are ever needed to name them
    (`differences`), so the majority's names need not be held."""

    def __init__(self, counted: Sequence[CountedFingerprint]) -> None:
        self._counted = counted
        groups: dict[NumericsKey, list[int]] = {}
        for index, entry in enumerate(counted):
            groups.setdefault(entry.numerics.key, []).append(index)
        self.compared = 0
        self._keys = sorted(groups, key=lambda key: (key_text(key), key.model_dump_json()))
        self._members = groups
        self._judged: dict[int, tuple[tuple[str, ...], tuple[str, ...], dict[str, str | None]]] = {}
        for indices in groups.values():
            total = sum(counted[index].nodes for index in indices)
            if total < 2:
                continue
            self.compared += total
            names = sorted({name for index in indices for name in counted[index].numerics.digests})
            majority: dict[str, str | None] = {}
            for name in names:
                votes: Counter[str] = Counter()
                for index in indices:
                    votes[counted[index].numerics.digests.get(name, "")] += counted[index].nodes
                (value, count), *_ = votes.most_common(1)
                majority[name] = value if 2 * count > total else None
            disputed = tuple(name for name in names if majority[name] is None)
            for index in indices:
                digests = counted[index].numerics.digests
                outvoted = tuple(
                    name for name in names if majority[name] is not None and digests.get(name) != majority[name]
                )
                if outvoted or disputed:
                    self._judged[index] = (outvoted, disputed, majority)

    def named(self, index: int) -> bool:
        """Whether the nodes of counted fingerprint `index` are named."""
        return index in self._judged

    def differences(self, members: Iterable[Member]) -> list[NumericsDifference]:
        """Each named node's difference, by key then in the order of `members`: every node counted, with the
        index of its fingerprint, in node order (a node's entries together: its other entries are not its peers)."""
        found: dict[NumericsKey, list[NumericsDifference]] = {}
        causes: dict[tuple[int, frozenset[int]], str] = {}
        for node, group in groupby(members, key=lambda member: member[0]):
            indices = [index for _, index in group]
            own = Counter(indices)
            for index in indices:
                if index not in self._judged:
                    continue
                entry = self._counted[index]
                outvoted, disputed, majority = self._judged[index]
                candidates = [
                    other
                    for other in self._members[entry.numerics.key]
                    if not outvoted
                    or all(self._counted[other].numerics.digests.get(name) == majority[name] for name in outvoted)
                ]
                peers = {other: self._counted[other].nodes - own[other] for other in candidates}
                present = frozenset(other for other, count in peers.items() if count > 0)
                cause = causes.get((index, present))
                if cause is None:
                    stacks = [self._counted[other].stack for other in candidates if other in present]
                    cause = causes.setdefault((index, present), likely_cause(entry.stack, entry.numerics, stacks))
                if outvoted:
                    count = sum(peers.values())
                    against = f"the {count} other nodes of its key" if count != 1 else "the other node of its key"
                else:
                    total = sum(self._counted[other].nodes for other in self._members[entry.numerics.key])
                    against = (
                        f"the others: no value has a majority among its key's {total} nodes (pin a reference: "
                        "verify --expect-numerics)"
                    )
                difference = NumericsDifference(node, entry.numerics.key, outvoted or disputed, against, cause)
                found.setdefault(entry.numerics.key, []).append(difference)
        return [difference for key in self._keys for difference in found.get(key, [])]


def odd_nodes(latest: Sequence[tuple[str, Fingerprinted]]) -> tuple[list[NumericsDifference], int]:
    """The nodes whose digests differ from their key's majority, from each node's latest certificate (in node
    order); and how many nodes were compared (those sharing a key with another). The nodes alike are counted
    once per fingerprint and stack object (`OddFingerprints`: a fleet status's rows share one)."""
    counted: list[CountedFingerprint] = []
    index_of: dict[tuple[int, int], int] = {}
    members: list[Member] = []
    for node, body in latest:
        if body.numerics is None:
            continue
        index = index_of.setdefault((id(body.numerics), id(body.stack)), len(counted))
        if index == len(counted):
            counted.append(CountedFingerprint(body.numerics, body.stack, 0))
        counted[index] = CountedFingerprint(body.numerics, body.stack, counted[index].nodes + 1)
        members.append((node, index))
    judged = OddFingerprints(counted)
    return judged.differences(members), judged.compared


@dataclass(frozen=True)
class NumericsReference:
    """A pinned fingerprint (`verify --expect-numerics FILE`), with the stack of the certificate it came from."""

    numerics: Numerics
    stack: JsonObject | None
    source: str


@dataclass(frozen=True)
class ReferenceJudgement:
    """A fingerprint judged against the pinned reference of its key: the `numerics/expected_fingerprint` check,
    and, when the bits differ, which digests and the likely cause (for the formats that carry them apart)."""

    check: Check
    differing: tuple[str, ...] = ()
    cause: str = ""


def reference_check(numerics: Numerics | None, stack: JsonObject, references: Sequence[NumericsReference]) -> Check:
    """The `numerics/expected_fingerprint` check: the fingerprint (of a run whose kernel saw `stack`) equals
    the reference of its key."""
    return judge_against(numerics, stack, references).check


def judge_against(
    numerics: Numerics | None, stack: JsonObject, references: Sequence[NumericsReference]
) -> ReferenceJudgement:
    """`reference_check`, with the digests that differ and the likely cause."""

    def judged(passed: bool, detail: str, differing: tuple[str, ...] = (), cause: str = "") -> ReferenceJudgement:
        return ReferenceJudgement(
            Check(category="numerics", name="expected_fingerprint", passed=passed, detail=detail), differing, cause
        )

    if numerics is None:
        return judged(
            False, "no fingerprint was computed in this run (see numerics/fingerprint), so none can match the reference"
        )
    matching = [reference for reference in references if reference.numerics.key == numerics.key]
    if not matching:
        nearest = min(references, key=lambda reference: len(key_differences(reference.numerics.key, numerics.key)))
        differences = "; ".join(key_differences(nearest.numerics.key, numerics.key)[:3])
        return judged(
            False,
            f"no reference of {nearest.source} is for this node's key ({differences}, reference vs here): pin "
            "one made with this stack",
        )
    reference = matching[0]
    differing = differing_digests(numerics.digests, reference.numerics.digests)
    if not differing:
        return judged(True, f"all {len(numerics.digests)} digests equal the reference of {reference.source}")
    cause = likely_cause(stack, numerics, [reference.stack] if reference.stack is not None else [])
    return judged(
        False,
        f"{digests_text(differing)} from the reference of {reference.source}; likely cause: {cause}",
        differing,
        cause,
    )


def judged_certificate(
    body: CertificateBody, references: Sequence[NumericsReference]
) -> tuple[CertificateBody, ReferenceJudgement]:
    """The certificate judged alone against the pinned references (`cert export --expect-numerics`): its
    `numerics/expected_fingerprint` check is this judgement (one its run made is replaced), and it passes only
    if every check does. The signed certificate is unchanged; this is what its renderings say."""
    judgement = judge_against(body.numerics, body.stack, references)
    checks = tuple(
        check for check in body.checks if (check.category, check.name) != ("numerics", "expected_fingerprint")
    ) + (judgement.check,)
    return body.model_copy(update={"checks": checks, "passed": all(check.passed for check in checks)}), judgement


@dataclass(frozen=True)
class PairComparison:
    """Two certificates' fingerprints: `differing` digests when they share a key (empty: the same bits), else
    a `note` saying why they cannot be compared."""

    differing: tuple[str, ...] = ()
    cause: str = ""
    note: str = ""

    def line(self) -> str:
        if self.note:
            return f"numerics: {self.note}"
        if self.differing:
            return f"numerics: {digests_text(self.differing)} from A's; likely cause: {shown(self.cause, 400)}"
        return "numerics: the same bits (every digest equal, same key)"


def compare_pair(first: CertificateBody, second: CertificateBody) -> PairComparison:
    """Certificate B's fingerprint against A's: B is judged, A is the reference."""
    if first.numerics is None or second.numerics is None:
        which = " and ".join(name for name, body in (("A", first), ("B", second)) if body.numerics is None)
        return PairComparison(note=f"no fingerprint in {which} (certified before lockgen computed one): not compared")
    differences = key_differences(first.numerics.key, second.numerics.key)
    if differences:
        return PairComparison(
            note=f"not compared: the certificates differ in their key ({'; '.join(differences[:3])}), so their bits "
            "may differ by design"
        )
    differing = differing_digests(first.numerics.digests, second.numerics.digests)
    return PairComparison(differing, likely_cause(second.stack, second.numerics, [first.stack]) if differing else "")
