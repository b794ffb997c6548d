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
from lockgen.adapters.atomic_files import write_atomic
from lockgen.adapters.lock.lockfile_yaml import load_lock
from lockgen.core.stack import stack_layout
from lockgen.core.lock.lock_builder import LockgenMeta
from lockgen.core.stack.stack_layout import LOCK_SUFFIX
from lockgen.core.stack.inheritance import cuda_stack_changes
from lockgen.core.certificate.cert_formats import render_certificate, rendering_notes
from lockgen.api.steps import team_steps
from lockgen.api.steps.certificate_steps import (
    list_certificates,
    read_certificate,
    read_numerics_references,
    read_signed,
)
from lockgen.api.steps.certificate_proof import signers
from lockgen.core.certificate.certify import FigureChange, compare_figures
from lockgen.core.certificate.numerics import PairComparison, compare_pair, judged_certificate
from lockgen.errors import LockFormatError, LockgenError, UserError
from lockgen.model.certificate import Certificate, CertificateBody, readings
from lockgen.model.export_formats import NFD_VALID_FOR
from lockgen.model.results import CertificateExport


__all__ = [
    "Comparison",
    "check_certificate",
    "compare",
    "export_certificate",
    "folder_certificates",
    "inherited_certificates",
    "keygen",
    "list_certificates",
    "require_verified",
]


def keygen(path: Path) -> tuple[Path, Path]:
    """Writes an Ed25519 key pair: the private key at `path` (mode 0600), the public one at `path.pub`."""
    return signing.keygen(path)


def check_certificate(path: Path, public_key: Path | None, lock: Path | None) -> Certificate:
    """Reads a certificate, refusing changed bytes, a bad signature, or a lock it does not cover."""
    _, certificate = read_certificate(path, public_key)
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


def require_verified(path: Path, certificate: Certificate, public_key: Path | None) -> str:
    """What `cert verify` could prove: a signed certificate checked without its key proves nothing of its
    content (anyone can rewrite a body and keep it canonical), so that is an error, not a pass."""
    if public_key is not None:
        return "signature valid"
    if certificate.signature is not None:
        raise UserError(
            f"`{path}` is signed by key {certificate.signature.key_id}, but no --key was given: only its form "
            "was checked, not its signature, so its content is unproven",
            "pass --key with the signer's public key (KEY.pub)",
        )
    return "unsigned: only its form was checked (anyone could have written it)"


def export_certificate(
    path: Path,
    fmt: str,
    public_key: Path | None,
    out: Path | None,
    valid_for: dt.timedelta = NFD_VALID_FOR,
    expect_numerics: Path | None = None,
) -> CertificateExport:
    """The certificate rendered in `fmt` (prom, nfd, npd, junit), after the checks `cert verify` makes (the
    signature too, with `public_key`); with `expect_numerics` (a reference fingerprint per key, as `verify
    --expect-numerics` reads it), judged alone against it first, so a node whose bits differ fails in every
    format. With `out`, written there atomically, so a reader that polls the file (node_exporter, NFD) sees the
    old rendering or the new, never half of one."""
    references = (
        read_numerics_references(
            expect_numerics,
            signing.public_keys([public_key]) if public_key is not None else {},
            "pass --key with the public key that signed the reference (KEY.pub), or pin the good node's `numerics` "
            "object instead",
        )
        if expect_numerics is not None
        else ()
    )
    body = check_certificate(path, public_key, None).certificate
    judgement = None
    if references:
        body, judgement = judged_certificate(body, references)
    text = render_certificate(body, fmt, valid_for, judgement)
    if out is not None:
        write_atomic(out, text)
    notes = rendering_notes(body, fmt, out, dt.datetime.now(dt.timezone.utc), valid_for)
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
    first, second = read_signed(a, signers(keys)).certificate, read_signed(b, signers(keys)).certificate
    changes = compare_figures(readings(first.figures), readings(second.figures), noise)
    return Comparison(changes, compare_pair(first, second))


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
