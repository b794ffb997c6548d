"""Numerics fingerprints compared across nodes, in plain values: which node computes different bits from the
others of its key (the same GPU model, driver, environment and library versions: `FingerprintKey`), which digests
differ (a digest measured on some nodes only is said as such: another lockgen or mode measured other digests, not
other bits), and the likely cause, in order: a setting that differs from the nodes it is compared with
(NVIDIA_TF32_OVERRIDE=0 changes the TF32 product's bits), a library from outside the environment, software the key
cannot tell apart (an environment without a digest), else the hardware itself (silent data corruption).

Pure and free of pydantic: `fleet status` compares a fleet's kept fingerprints (`model.fingerprint`'s plain
`Fingerprint`, read from a kept verdict's values) without importing the models; a certificate's `Numerics` model is
read into the same (`fingerprint_of`), so both are judged by one rule. `core.certificate.numerics` judges a
certificate against a pinned reference and two certificates against each other with it."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import TYPE_CHECKING, Any

from lockgen.model.fingerprint import Fingerprint, FingerprintKey, digests_text
from lockgen.model.json_values import list_at, object_at

if TYPE_CHECKING:
    from lockgen.model.certificate import Numerics
    from lockgen.model.json_values import JsonObject

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


def key_text(key: FingerprintKey) -> str:
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


def likely_cause(stack: JsonObject, numerics: Fingerprint | Numerics, peers: Sequence[JsonObject]) -> str:
    """Why the node of `stack` (the kernel's) and `numerics` computes other bits than `peers` (the stacks of the
    certificates it is compared with), most likely first (a bare reference, which has no stack: `unrecorded_cause`)."""
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


def unrecorded_cause(stack: JsonObject) -> str:
    """Why the node of `stack` computes other bits than a bare reference (a `numerics` object): it records no
    settings or libraries, so none can be said to differ; what this node has that can change numerics is named."""
    numeric = [f"{name}={value}" for name, value in _settings(stack).items() if name.startswith(NUMERIC_SETTINGS)]
    foreign = _foreign(stack)
    return (
        "the reference records no settings or libraries to compare (pin the good node's certificate, not its "
        "numerics object): a setting or other software cannot be ruled out, else the hardware"
        + (f"; set here: {', '.join(numeric[:3])}" if numeric else "")
        + (f"; loaded here from outside the environment: {', '.join(foreign[:3])}" if foreign else "")
    )


MEASURED_ELSEWHERE = (
    "this node and the others of its key measured different sets of digests: another lockgen (its kernel) or mode "
    "computed them, not the hardware"
)


def one_sided_text(here_only: Sequence[str], there_only: Sequence[str], whose: str, here: str) -> list[str]:
    """The digests measured on one side only, in words: those measured `here` ("here", "in B") but missing from
    `whose` ("A's", "the others of its key"), and those in `whose` but not measured `here`."""
    said = []
    for names, one, several in (
        (
            here_only,
            f"was measured {here} but is missing from {whose}",
            f"were measured {here} but are missing from {whose}",
        ),
        (there_only, f"is in {whose} but was not measured {here}", f"are in {whose} but were not measured {here}"),
    ):
        if names:
            said.append(f"digest {names[0]} {one}" if len(names) == 1 else f"digests {', '.join(names)} {several}")
    return said


@dataclass(frozen=True)
class NumericsDifference:
    """A node whose bits differ: which digests (`digests`: all of them; of those, `missing_here`: measured by its
    key's other nodes, not by it; `missing_elsewhere`: measured by it, not by the others), from whom, and the likely
    cause."""

    node: str
    key: FingerprintKey
    digests: tuple[str, ...]
    against: str  # "the 3 other nodes of its key", "no majority among 2 nodes", "the reference"
    cause: str
    missing_here: tuple[str, ...] = ()
    missing_elsewhere: tuple[str, ...] = ()

    def as_json(self) -> dict[str, object]:
        return {
            "node": self.node,
            "key": self.key.as_json(),
            "digests": list(self.digests),
            "missing_here": list(self.missing_here),
            "missing_elsewhere": list(self.missing_elsewhere),
            "against": self.against,
            "cause": self.cause,
        }


def difference_words(entry: Mapping[str, Any]) -> str:
    """What differs of a node in words (`NumericsDifference.as_json`'s `entry`; the text's NUMERICS line and the
    page say it): the digests whose values differ from whom, then those measured on one side only, which say other
    software or mode measured, not other bits."""
    one_sided = set(entry["missing_here"]) | set(entry["missing_elsewhere"])
    changed = [name for name in entry["digests"] if name not in one_sided]
    said = [f"{digests_text(changed)} from {entry['against']}"] if changed else []
    said += one_sided_text(entry["missing_elsewhere"], entry["missing_here"], "the others of its key", "here")
    return "; ".join(said)


@dataclass(frozen=True)
class CountedFingerprint:
    """A fingerprint and a kernel stack's cause evidence that `nodes` nodes' latest certificates share: what a
    fleet's comparison holds instead of its nodes (10,000 nodes, a handful of these)."""

    numerics: Fingerprint
    stack: JsonObject
    nodes: int


Member = tuple[str, int]  # (node, the index of its counted fingerprint)


@dataclass(frozen=True)
class _Judged:
    """Why a counted fingerprint is named: the digests its value is outvoted on, those whose values have no
    majority (it measured them), those its key's majority measured and it did not (`missing_here`) or it measured
    and the majority did not (`missing_elsewhere`: where as many nodes measured a digest as did not, both), and the
    majority's value of each digest (None: none has one)."""

    outvoted: tuple[str, ...]
    disputed: tuple[str, ...]
    missing_here: tuple[str, ...]
    missing_elsewhere: tuple[str, ...]
    majority: dict[str, str | None]


class OddFingerprints:
    """Counted fingerprints judged against their key's majority, digest by digest: which of them are named
    (outvoted on some digest, of a key where some digest has no majority, or measuring another set of digests than
    the majority: a digest a node did not measure is no value, so it never outvotes nor blames the hardware), and how
    many nodes were compared (those sharing a key with another). Only the nodes of the named ones are ever needed to
    name them (`differences`), so the majority's names need not be held."""

    def __init__(self, counted: Sequence[CountedFingerprint]) -> None:
        self._counted = counted
        groups: dict[FingerprintKey, list[int]] = {}
        for index, entry in enumerate(counted):
            groups.setdefault(entry.numerics.key, []).append(index)
        self.compared = 0
        self._keys = sorted(groups, key=lambda key: (key_text(key), json.dumps(key.as_json(), ensure_ascii=False)))
        self._members = groups
        self._judged: dict[int, _Judged] = {}
        for indices in groups.values():
            total = sum(counted[index].nodes for index in indices)
            if total < 2:
                continue
            self.compared += total
            names = sorted({name for index in indices for name in counted[index].numerics.digests})
            majority: dict[str, str | None] = {}
            measured: dict[str, int] = {}  # by how many nodes
            for name in names:
                votes: Counter[str] = Counter()
                for index in indices:
                    value = counted[index].numerics.digests.get(name)
                    if value is not None:
                        votes[value] += counted[index].nodes
                measured[name] = sum(votes.values())
                (value, count), *_ = votes.most_common(1)
                majority[name] = value if 2 * count > measured[name] else None
            disputed = [name for name in names if majority[name] is None]
            for index in indices:
                digests = counted[index].numerics.digests
                outvoted = tuple(
                    name
                    for name in names
                    if majority[name] is not None and name in digests and digests[name] != majority[name]
                )
                missing_here = tuple(name for name in names if name not in digests and 2 * measured[name] >= total)
                missing_elsewhere = tuple(name for name in names if name in digests and 2 * measured[name] <= total)
                judged = _Judged(
                    outvoted,
                    tuple(name for name in disputed if name in digests),
                    missing_here,
                    missing_elsewhere,
                    majority,
                )
                if outvoted or judged.disputed or missing_here or missing_elsewhere:
                    self._judged[index] = judged

    def named(self, index: int) -> bool:
        """Whether the nodes of counted fingerprint `index` are named."""
        return index in self._judged

    def differences(self, members: Iterable[Member]) -> list[NumericsDifference]:
        """Each named node's difference, by key then in the order of `members`: every node counted, with the
        index of its fingerprint, in node order (a node's entries together: its other entries are not its peers)."""
        found: dict[FingerprintKey, list[NumericsDifference]] = {}
        causes: dict[tuple[int, frozenset[int]], str] = {}
        for node, group in groupby(members, key=lambda member: member[0]):
            indices = [index for _, index in group]
            own = Counter(indices)
            for index in indices:
                judged = self._judged.get(index)
                if judged is None:
                    continue
                entry = self._counted[index]
                outvoted, majority = judged.outvoted, judged.majority
                candidates = [
                    other
                    for other in self._members[entry.numerics.key]
                    if not outvoted
                    or all(self._counted[other].numerics.digests.get(name) == majority[name] for name in outvoted)
                ]
                peers = {other: self._counted[other].nodes - own[other] for other in candidates}
                present = frozenset(other for other, count in peers.items() if count > 0)
                one_sided = judged.missing_here + judged.missing_elsewhere
                cause = MEASURED_ELSEWHERE if one_sided else causes.get((index, present))
                if cause is None:
                    stacks = [self._counted[other].stack for other in candidates if other in present]
                    cause = causes.setdefault((index, present), likely_cause(entry.stack, entry.numerics, stacks))
                if outvoted or not judged.disputed:
                    count = sum(peers.values())
                    against = f"the {count} other nodes of its key" if count != 1 else "the other node of its key"
                else:
                    total = sum(self._counted[other].nodes for other in self._members[entry.numerics.key])
                    against = (
                        f"the others: no value has a majority among its key's {total} nodes (pin a reference: "
                        "verify --expect-numerics)"
                    )
                difference = NumericsDifference(
                    node,
                    entry.numerics.key,
                    tuple(sorted({*(outvoted or judged.disputed), *one_sided})),
                    against,
                    cause,
                    judged.missing_here,
                    judged.missing_elsewhere,
                )
                found.setdefault(entry.numerics.key, []).append(difference)
        return [difference for key in self._keys for difference in found.get(key, [])]
