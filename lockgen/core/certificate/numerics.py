"""Numerics fingerprints judged, pure: the certificate's fingerprint from the kernel's (`numerics_of`, under the
key nodes must share: `NumericsKey`), a certificate against a pinned reference (`verify --expect-numerics`:
`judge_against`) and two certificates against each other (`cert compare`: `compare_pair`). The vote over a set of
nodes and the likely cause are `core.certificate.numerics_votes`' (plain values, which `fleet status` judges a
fleet's kept fingerprints by).

A node is judged against the majority of its key's nodes, digest by digest; where no digest value has a
majority (two nodes, say) every node in dispute is named, and a pinned reference (`verify --expect-numerics`)
judges a node alone."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lockgen.core.certificate.numerics_votes import likely_cause, one_sided_text, unrecorded_cause
from lockgen.model.certificate import CertificateBody, Check, Hardware, KernelNumerics, Numerics, NumericsKey
from lockgen.model.fingerprint import digests_text
from lockgen.model.json_values import JsonObject
from lockgen.model.names import shown


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


def key_differences(first: NumericsKey, second: NumericsKey) -> list[str]:
    """`name: A vs B` for each part of the key the two differ in."""
    a, b = first.model_dump(), second.model_dump()
    return [f"{name}: {a[name]} vs {b[name]}" for name in a if a[name] != b[name]]


def differing_digests(mine: dict[str, str], theirs: dict[str, str]) -> tuple[str, ...]:
    """The digests two fingerprints of one key disagree on (one missing from either counts)."""
    return tuple(name for name in sorted(set(mine) | set(theirs)) if mine.get(name) != theirs.get(name))


@dataclass(frozen=True)
class NumericsReference:
    """A pinned fingerprint (`verify --expect-numerics FILE`), with the stack of the certificate it came from."""

    numerics: Numerics
    stack: JsonObject | None
    source: str


MATCHES = "matches"
DIFFERS = "differs"
NO_REFERENCE = "no reference for this key"  # nothing was compared: the reference pins other nodes, not this one
NO_FINGERPRINT = "no fingerprint"  # nothing was compared: the run computed none


@dataclass(frozen=True)
class ReferenceJudgement:
    """A fingerprint judged against the pinned reference of its key: the `numerics/expected_fingerprint` check,
    its `outcome` (`MATCHES`, `DIFFERS`, or why nothing was compared: `NO_REFERENCE`, `NO_FINGERPRINT`), and, when
    the bits differ, which digests and the likely cause (for the formats that carry them apart)."""

    check: Check
    outcome: str
    differing: tuple[str, ...] = ()
    cause: str = ""

    @property
    def compared(self) -> bool:
        """Whether a reference of the fingerprint's key was compared with it (a mismatch means other bits)."""
        return self.outcome in (MATCHES, DIFFERS)


MEASURED_OTHERWISE = (
    "the two runs measured different sets of digests: another lockgen (its kernel) or mode computed them, not the "
    "hardware"
)


def difference_text(mine: dict[str, str], theirs: dict[str, str], whose: str, here: str = "here") -> str:
    """How the digests `mine` (measured `here`: "here", "in B") differ from `theirs` (`whose`: "the reference of
    `ref.json`", "A's"): the values that differ, then the digests measured on one side only, which say other
    software measured, not other bits."""
    differing = differing_digests(mine, theirs)
    changed = [name for name in differing if name in mine and name in theirs]
    said = [f"{digests_text(changed)} from {whose}"] if changed else []
    said += one_sided_text(
        [name for name in differing if name not in theirs],
        [name for name in differing if name not in mine],
        whose,
        here,
    )
    return "; ".join(said)


def one_sided(mine: dict[str, str], theirs: dict[str, str]) -> bool:
    """Whether a digest was measured on one side only."""
    return set(mine) != set(theirs)


def reference_check(numerics: Numerics | None, stack: JsonObject, references: Sequence[NumericsReference]) -> Check:
    """The `numerics/expected_fingerprint` check: the fingerprint (of a run whose kernel saw `stack`) equals
    the reference of its key."""
    return judge_against(numerics, stack, references).check


def judge_against(
    numerics: Numerics | None, stack: JsonObject, references: Sequence[NumericsReference]
) -> ReferenceJudgement:
    """`reference_check`, with the digests that differ and the likely cause."""

    def judged(outcome: str, detail: str, differing: tuple[str, ...] = (), cause: str = "") -> ReferenceJudgement:
        check = Check(category="numerics", name="expected_fingerprint", passed=outcome == MATCHES, detail=detail)
        return ReferenceJudgement(check, outcome, differing, cause)

    if numerics is None:
        return judged(
            NO_FINGERPRINT,
            "no fingerprint was computed in this run (see numerics/fingerprint), so none can match the reference",
        )
    matching = [reference for reference in references if reference.numerics.key == numerics.key]
    if not matching:
        nearest = min(references, key=lambda reference: len(key_differences(reference.numerics.key, numerics.key)))
        differences = "; ".join(key_differences(nearest.numerics.key, numerics.key)[:3])
        return judged(
            NO_REFERENCE,
            f"no reference of {nearest.source} is for this node's key ({differences}, reference vs here): pin "
            "one made with this stack",
        )
    # the references of one key agree (`read_numerics_references`): one that carries its node's stack names causes
    reference = next((reference for reference in matching if reference.stack is not None), matching[0])
    mine, theirs = numerics.digests, reference.numerics.digests
    differing = differing_digests(mine, theirs)
    if not differing:
        return judged(MATCHES, f"all {len(mine)} digests equal the reference of {reference.source}")
    cause = (
        MEASURED_OTHERWISE
        if one_sided(mine, theirs)
        else unrecorded_cause(stack)
        if reference.stack is None
        else likely_cause(stack, numerics, [reference.stack])
    )
    return judged(
        DIFFERS,
        f"{difference_text(mine, theirs, f'the reference of {reference.source}')}; likely cause: {cause}",
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
    said: str = ""  # the difference in words (`difference_text`)

    def line(self) -> str:
        if self.note:
            return f"numerics: {self.note}"
        if self.differing:
            return f"numerics: {shown(self.said, 400)}; likely cause: {shown(self.cause, 400)}"
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
    mine, theirs = second.numerics.digests, first.numerics.digests
    differing = differing_digests(mine, theirs)
    if not differing:
        return PairComparison()
    cause = (
        MEASURED_OTHERWISE if one_sided(mine, theirs) else likely_cause(second.stack, second.numerics, [first.stack])
    )
    return PairComparison(differing, cause, said=difference_text(mine, theirs, "A's", "in B"))
