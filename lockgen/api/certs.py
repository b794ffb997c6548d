"""Use cases over certificates: check one (bytes, signature, the lock it covers), compare two, list
those under a folder, render one for the tools fleets read, and make a signing key pair. Light imports
only, like `verify`."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lockgen.adapters.lock import lock_file
from lockgen.adapters.node import signing
from lockgen.adapters.atomic_files import WRITABLE_HINT, check_writable, write_atomic
from lockgen.adapters.lock.lockfile_yaml import load_lock
from lockgen.core.stack import stack_layout
from lockgen.core.lock.lock_builder import LockgenMeta
from lockgen.core.stack.stack_layout import LOCK_SUFFIX
from lockgen.core.stack.inheritance import cuda_stack_changes
from lockgen.core.certificate.cert_formats import render_certificate, rendering_notes
from lockgen.api.steps import team_steps
from lockgen.api.steps.certificate_steps import (
    list_certificates,
    read_numerics_references,
    read_signed,
)
from lockgen.api.steps.certificate_proof import signers
from lockgen.core.certificate.certify import FigureChange, compare_figures
from lockgen.core.certificate.numerics import PairComparison, compare_pair, judged_certificate
from lockgen.errors import LockFormatError, LockgenError, UserError
from lockgen.model.certificate import Certificate, CertificateBody, readings
from lockgen.model.export_formats import NFD_VALID_FOR
from lockgen.model.names import shown
from lockgen.model.results import CertificateExport, VerifiedCertificate


__all__ = [
    "Comparison",
    "check_certificate",
    "compare",
    "export_certificate",
    "folder_certificates",
    "inherited_certificates",
    "keygen",
    "list_certificates",
    "verified_certificate",
]


def keygen(path: Path) -> tuple[Path, Path]:
    """Writes an Ed25519 key pair: the private key at `path` (mode 0600), the public one at `path.pub`."""
    return signing.keygen(path)


def check_certificate(path: Path, keys: Sequence[Path], lock: Path | None) -> Certificate:
    """Reads a certificate, refusing changed bytes, a bad signature, or a lock it does not cover; with `keys`
    (public keys, `--key` repeated), refusing it unless it is signed by one of them and its signature verifies."""
    certificate = read_signed(path, signers(keys))
    if lock is not None:
        digest = lock_file.read(lock).sha256
        covered = certificate.certificate.subject.lock_sha256
        if covered != digest:
            raise LockFormatError(
                f"the certificate covers lock sha256 {covered}, not `{lock}` ({digest[:16]}…)",
                "certify this lock with `lockgen verify --lock`",
            )
        conformance = certificate.certificate.subject.conformance
        if conformance is None or not conformance.clean:
            raise LockFormatError(
                f"the certificate names `{lock}` but records no proof that the environment was it",
                "certify again with this lockgen: `lockgen verify --lock` checks conformance first",
            )
    return certificate


def verified_certificate(path: Path, keys: Sequence[Path], lock: Path | None) -> VerifiedCertificate:
    """What `cert verify` accepts, and so what `cert export` renders: `check_certificate`'s checks and, without
    `keys`, a signed certificate refused, since checked without its key it proves nothing of its content (anyone
    can rewrite a body and keep it canonical). An unsigned one is accepted, its form alone checked, and said so."""
    certificate = check_certificate(path, keys, lock)
    if keys:
        return VerifiedCertificate(certificate, "signature valid")
    if certificate.signature is not None:
        raise UserError(
            f"`{shown(str(path))}` is signed by key {shown(certificate.signature.key_id)}, but no --key was given: "
            "only its form was checked, not its signature, so its content is unproven",
            "pass --key with the signer's public key (KEY.pub)",
        )
    return VerifiedCertificate(certificate, "unsigned: only its form was checked (anyone could have written it)")


def export_certificate(
    path: Path,
    fmt: str,
    keys: Sequence[Path],
    out: Path | None,
    valid_for: dt.timedelta = NFD_VALID_FOR,
    expect_numerics: Path | None = None,
) -> CertificateExport:
    """The certificate rendered in `fmt` (prom, nfd, npd, junit), once `verified_certificate` accepts it, as `cert
    verify` does (its signature checked with one of `keys`; without keys, only an unsigned certificate, and a note
    says so); with `expect_numerics` (a reference fingerprint per key, as `verify --expect-numerics` reads it: a
    reference certificate signed by one of `keys`), judged alone against it first, so a node whose bits differ
    fails in every format. With `out`, written there atomically, so a reader that polls the file (node_exporter,
    NFD) sees the old rendering or the new, never half of one."""
    if out is not None:  # before anything is read: named as given, a FIFO or a device never replaced
        check_writable(out, f"--out {out}", WRITABLE_HINT, file=True)
    references = (
        read_numerics_references(
            expect_numerics,
            signing.public_keys(keys),
            "pass --key with the public key that signed the reference (KEY.pub), or pin the good node's `numerics` "
            "object instead",
        )
        if expect_numerics is not None
        else ()
    )
    verified = verified_certificate(path, keys, None)
    body = verified.certificate.certificate
    judgement = None
    if references:
        body, judgement = judged_certificate(body, references)
    text = render_certificate(body, fmt, valid_for, judgement)
    if out is not None:
        write_atomic(out, text)
    notes = rendering_notes(body, fmt, out, dt.datetime.now(dt.timezone.utc), valid_for)
    if not keys:
        notes.insert(0, f"`{shown(str(path))}` is {verified.checked}")
    return CertificateExport(text=text, passed=body.passed, notes=tuple(notes))


@dataclass(frozen=True)
class Comparison:
    """Two certificates compared: each figure's change, and their numerics fingerprints."""

    figures: list[FigureChange]
    numerics: PairComparison


def compare(a: Path, b: Path, noise: float, keys: Sequence[Path] = ()) -> Comparison:
    """Each figure's change from certificate `a` to `b`, and whether `b` computes the bits `a` did. With `keys`
    (public keys), each certificate must be signed by one of them and its signature is checked first; without,
    only their form is."""
    first, second = _compared("A", a, signers(keys)), _compared("B", b, signers(keys))
    changes = compare_figures(readings(first.figures), readings(second.figures), noise)
    return Comparison(changes, compare_pair(first, second))


def _compared(label: str, path: Path, keys: dict[str, Path]) -> CertificateBody:
    """The certificate `cert compare` reads as `label` (A or B), by `read_signed`; its refusal says which of the two
    it is and, unless the reason names it already, its file (`certificate signature does not verify` alone does
    not say which)."""
    try:
        return read_signed(path, keys).certificate
    except LockgenError as error:
        named = str(path) in error.message or shown(str(path)) in error.message
        where = f"certificate {label}" + ("" if named else f" `{shown(str(path), 300)}`")
        raise UserError(f"{where}: {error.message}", error.hint) from None


@dataclass(frozen=True)
class Inherited:
    """A team lock and what the base's certificates say of it: the ones that cover it, or why none can."""

    team_lock: Path
    base_lock: Path
    certificates: list[tuple[Path, CertificateBody]]
    changes: list[str]  # the CUDA-relevant packages the team moved; empty when the base's certificates cover it
    base_image: str | None = None  # the base's image, when `extends` names one: its certificates are attached there


def folder_certificates(folder: Path) -> tuple[list[tuple[Path, CertificateBody]], list[Inherited]]:
    """`lockgen certs FOLDER`: the certificates under it, oldest first, and what its team locks inherit."""
    return list_certificates(folder), inherited_certificates(folder)


def inherited_certificates(folder: Path) -> list[Inherited]:
    """For each team lock under `folder` (a lock of a stack that `extends` a base): the base's certificates
    of the exact base lock it was held to, inherited when its CUDA stack is the base's."""
    found = []
    for team_path in sorted(folder.rglob(f"locks/*{LOCK_SUFFIX}")):
        try:
            team = load_lock(team_path)
        except LockgenError:
            continue
        held_to, base_path = LockgenMeta(team).base_lock, team_steps.held_base_path(team_path, team)
        if not held_to or base_path is None or not base_path.is_file():
            continue
        base = load_lock(base_path)
        certificates = [
            (path, body)
            for path, body in list_certificates(base_path.parent.parent)
            if body.subject.lock_sha256 == held_to
        ]
        image = LockgenMeta(team).extends if stack_layout.names_an_image(LockgenMeta(team).extends) else None
        found.append(Inherited(team_path, base_path, certificates, cuda_stack_changes(base, team), image))
    return found
