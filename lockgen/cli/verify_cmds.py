"""`lockgen verify`, `lockgen keygen`, `lockgen cert verify|compare`, `lockgen certs` (a folder, or an image's
attestations) and `lockgen attest` (`cert export` is in `cert_export_cmd`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from lockgen.cli.cert_export_cmd import SIGNER_KEYS_HELP, parse_emit, parse_valid_for
from lockgen.cli.ui import environment, fail, handles_errors, noise_fraction, print_json, progress, say
from lockgen.model.export_formats import NFD_VALID_FOR
from lockgen.model.names import normalize_arch, shown

if TYPE_CHECKING:  # heavy imports stay inside the commands
    from lockgen.api.attestations import Admission

cert_app = typer.Typer(help="Check, compare and export certificates.", no_args_is_help=True, rich_markup_mode=None)


@handles_errors
def verify(
    arch: str = typer.Option(..., "--arch", help="The arch to certify (sm80, sm90, sm100 ...) or cpu."),
    lock: Optional[Path] = typer.Option(
        None,
        "--lock",
        help="The lock the environment must be: checked from its packages' own hashes before the kernel runs; "
        "expectations and digests come from it.",
    ),
    manifests: Optional[Path] = typer.Option(
        None, "--manifests", help="With --lock: a bundle from lockgen manifests or pin (no network)."
    ),
    allow_foreign: list[str] = typer.Option(
        [],
        "--allow-foreign",
        help="With --lock: a file no package states that you accept; hashed and recorded in the certificate. "
        "Repeatable.",
    ),
    python: Optional[str] = typer.Option(None, "--python", help="The environment's interpreter (default: this one)."),
    prefix: Optional[Path] = typer.Option(None, "--prefix", help="A materialized environment: uses PREFIX/bin/python."),
    image: Optional[str] = typer.Option(
        None,
        "--image",
        help="An image made by lockgen export (OCI layout folder, or docker://REF): runs its environment.",
    ),
    insecure: bool = typer.Option(
        False, "--insecure", help="With --image docker://REF: plain HTTP or a self-signed registry."
    ),
    expect: Optional[Path] = typer.Option(
        None, "--expect", help="Extra expectations as JSON (torch, cuda, cudnn, nccl, driver_min, gpu_count)."
    ),
    expect_numerics: Optional[Path] = typer.Option(
        None,
        "--expect-numerics",
        help="A reference numerics fingerprint the run's must equal: a good node's certificate, or its numerics "
        "object ({key, digests}), or a list of them.",
    ),
    out: Optional[Path] = typer.Option(None, "--out", help="Certificate path (default: next to the lock, in certs/)."),
    key: Optional[Path] = typer.Option(None, "--key", help="Ed25519 private key to sign with (lockgen keygen)."),
    quick: bool = typer.Option(False, "--quick", help="Fewer steps and repeats."),
    compiled: bool = typer.Option(False, "--compile", help="Also train with torch.compile."),
    allow_ptx: bool = typer.Option(False, "--allow-ptx", help="Accept a torch that reaches the arch only by PTX JIT."),
    gpus: Optional[int] = typer.Option(
        None, "--gpus", help="Processes for the multi-GPU checks (default: every GPU of the host)."
    ),
    timeout: float = typer.Option(600, "--timeout", help="Seconds each kernel run may take before it is killed."),
    nodes: int = typer.Option(
        1, "--nodes", help="Nodes taking part in the multi-GPU checks; run the same command on each."
    ),
    rendezvous: Optional[str] = typer.Option(
        None,
        "--rendezvous",
        help="With --nodes: HOST:PORT where the nodes meet (torchrun's c10d rendezvous), the same on every node.",
    ),
    rendezvous_id: str = typer.Option(
        "lockgen-verify", "--rendezvous-id", help="With --nodes: a name for this run, the same on every node."
    ),
    emit: list[str] = typer.Option(
        [],
        "--emit",
        help="Also write the certificate as FORMAT=FILE, atomically: prom (node_exporter textfile), nfd (NFD "
        "features.d; needs --lock), junit. Repeatable or comma-separated.",
    ),
    valid_for: Optional[str] = typer.Option(
        None,
        "--valid-for",
        help="With --emit nfd=FILE: how long the node features stay valid (30m, 12h, 7d, 2w; default 7d).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print {certificate, passed, checks, failed, not_run} as JSON."),
) -> None:
    """Run the verification kernel in the environment on this machine's GPUs and write a certificate."""
    from lockgen.model.requests import is_time_limit
    from lockgen.api.verify import VerifyOptions, verify as run

    if not is_time_limit(timeout):  # the fast path starts no kernel for it either (`fast_path._refused_surely`)
        fail(f"--timeout {timeout:g} is not a time limit", "pass --timeout SECONDS, a number above 0 (default 600)", 2)

    target = environment(
        prefix,
        python,
        image,
        ("--prefix, --python and --image each name the environment to verify", "pass one of them", 1),
        insecure=insecure,
    )
    renderings = parse_emit(emit, out)
    if valid_for is not None and not any(fmt == "nfd" for fmt, _ in renderings):
        fail("--valid-for is the lifetime of node features", "pass it with --emit nfd=FILE", 2)
    verified = run(
        VerifyOptions(
            arch=arch,
            environment=target,
            lock=lock,
            expect=expect,
            out=out,
            key=key,
            quick=quick,
            compiled=compiled,
            allow_ptx=allow_ptx,
            gpus=gpus,
            timeout_s=timeout,
            nodes=nodes,
            rendezvous_endpoint=rendezvous,
            rendezvous_id=rendezvous_id,
            manifests=manifests,
            allow_foreign=tuple(allow_foreign),
            emit=renderings,
            valid_for=NFD_VALID_FOR if valid_for is None else parse_valid_for(valid_for),
            expect_numerics=expect_numerics,
        ),
        progress,
    )
    body = verified.body
    failures = body.failures()
    not_run = {
        f"{group}/{name}": entry.reason
        for group, entries in sorted(body.figures.items())
        for name, entry in sorted(entries.items())
        if entry.value is None and entry.reason
    }
    for name, reason in not_run.items():
        progress(f"  no figure {name}: {reason}")  # not run, or not one to count (a replay that computed otherwise)
    for group, entries in sorted(body.figures.items()):  # a figure measured with a note: what made it slow
        for name, entry in sorted(entries.items()):
            if entry.value is not None and entry.reason:
                progress(f"  note {group}/{name} ({entry.value:.2f} {entry.unit}): {entry.reason}")
    progress(
        f"{len(body.checks) - len(failures)} of {len(body.checks)} checks passed in {body.duration_s:.0f} s; "
        f"certificate {'PASSED' if body.passed else 'FAILED'}"
    )
    if as_json:
        print_json(
            {
                "certificate": str(verified.path),
                "passed": body.passed,
                "checks": len(body.checks),
                "failed": [c.line() for c in failures],
                "not_run": not_run,
                "duration_s": body.duration_s,
            }
        )
    else:
        say(verified.path)
    if failures:
        fail(
            f"{len(failures)} checks failed: " + "; ".join(f"{c.category}/{c.name}: {c.detail}" for c in failures[:3]),
            "the certificate lists every check; compare it with a passing one: lockgen cert compare A B",
        )


@handles_errors
def keygen(out: Path = typer.Option(..., "--out", help="Private key path; the public key goes to OUT.pub.")) -> None:
    """Make an Ed25519 key pair for signing certificates."""
    from lockgen.api.certs import keygen as make

    private, public = make(out)
    say(private)
    say(public)


@cert_app.command("verify")
@handles_errors
def cert_verify(
    cert: Path = typer.Argument(..., help="A certificate file."),
    key: list[Path] = typer.Option([], "--key", help=SIGNER_KEYS_HELP),
    lock: Optional[Path] = typer.Option(None, "--lock", help="Also require that the certificate covers this lock."),
    as_json: bool = typer.Option(
        False, "--json", help="Print {certificate, checked, arch, gpus, passed, failed} as JSON."
    ),
) -> None:
    """Check a certificate: unchanged bytes, a valid signature, the lock it covers; exit 1 if it failed."""
    from lockgen.api.certs import verified_certificate

    verified = verified_certificate(cert, key, lock)
    state, body = verified.checked, verified.certificate.certificate
    where = (
        f"{body.hardware.gpu_count}x {', '.join(sorted(set(body.hardware.gpu_names)))}"
        if body.hardware.gpu_count
        else "the CPU"
    )
    if as_json:
        print_json(
            {
                "certificate": str(cert),
                "checked": state,
                "arch": body.arch,
                "gpus": list(body.hardware.gpu_names),
                "lock_sha256": body.subject.lock_sha256,
                "passed": body.passed,
                "failed": [c.line() for c in body.failures()],
            }
        )
    else:
        say(
            f"{cert}: {state}; {body.arch} on {where}; {'PASSED' if body.passed else 'FAILED'} "
            f"({len(body.failures())} failed checks)"
        )
    if not body.passed:
        raise typer.Exit(1)


@cert_app.command("compare")
@handles_errors
def cert_compare(
    a: Path = typer.Argument(..., help="The baseline certificate."),
    b: Path = typer.Argument(..., help="The new certificate."),
    noise: float = typer.Option(0.05, "--noise", help="Relative change treated as noise (0.05 = 5%)."),
    key: list[Path] = typer.Option(
        [],
        "--key",
        help="A signer's public key (KEY.pub): each certificate's signature is checked against it before comparing. "
        "Repeatable (one per signer).",
    ),
    as_json: bool = typer.Option(
        False,
        "--json",
        help="Print {figures: [{name, unit, old, new, change, regression, missing}], numerics: {differing, cause, "
        "note}}.",
    ),
) -> None:
    """Each figure's change from A to B, and whether B computes the bits A did (the numerics fingerprint, when
    both share its key); exit 1 when a figure regressed beyond the noise threshold or is in one only, or B's bits
    differ."""
    from lockgen.api.certs import compare

    comparison = compare(a, b, noise_fraction(noise), key)
    rows, numerics = comparison.figures, comparison.numerics
    if not key:
        progress(
            "note: signatures were not checked (pass --key KEY.pub): the figures are only as trustworthy as the files"
        )
    if as_json:
        print_json(
            {
                "figures": [row.__dict__ for row in rows],
                "numerics": {"differing": list(numerics.differing), "cause": numerics.cause, "note": numerics.note},
            }
        )
    else:
        for row in rows:
            say(row.line())
        say(numerics.line())
    regressions, missing = [r for r in rows if r.regression], [r for r in rows if r.missing]
    if regressions or missing or numerics.differing:
        said = (
            (
                [
                    f"{len(regressions)} figures regressed by more than {noise:.0%}: "
                    + ", ".join(r.name for r in regressions[:5])
                ]
                if regressions
                else []
            )
            + (
                [
                    f"{len(missing)} figures are in one certificate only: "
                    + ", ".join(f"{r.name} (missing from {r.missing})" for r in missing[:5])
                ]
                if missing
                else []
            )
            + (
                [
                    f"B's numerics fingerprint is not A's ({shown(numerics.said, 400)}); likely cause: "
                    f"{shown(numerics.cause, 400)}"
                ]
                if numerics.differing
                else []
            )
        )
        fail(
            "; ".join(said),
            "look at the telemetry in both certificates (clocks, power) before blaming the stack; a missing "
            "figure is a check one run did not make (--quick, fewer GPUs); different bits under one key: see the "
            "likely cause",
        )


def _summary(body) -> str:
    """One certificate as `lockgen certs` lists it: when, arch, GPUs, nodes, result, headline figures."""
    from lockgen.model.certificate import figure_at
    from verify.schema import ALLREDUCE_1GIB, gemm

    bf16 = figure_at(body.figures, gemm("bf16"))
    bus = figure_at(body.figures, ALLREDUCE_1GIB)
    extra = (f" bf16 {bf16.value:.0f} TFLOP/s" if bf16 and bf16.value else "") + (
        f" allreduce {bus.value:.0f} GB/s" if bus and bus.value else ""
    )
    nodes = f" on {body.distributed.nodes} nodes" if body.distributed and body.distributed.nodes > 1 else ""
    gpus = f"{body.hardware.gpu_count}x" if body.hardware.gpu_count else "CPU"
    return f"{body.created} {body.arch:<6} {gpus}{nodes} {'PASS' if body.passed else 'FAIL'}{extra}"


def _entry(body) -> dict:
    return {
        "created": body.created,
        "arch": body.arch,
        "mode": body.mode,
        "gpus": list(body.hardware.gpu_names),
        "passed": body.passed,
        "lock_sha256": body.subject.lock_sha256,
    }


@handles_errors
def certs(
    where: str = typer.Argument(
        "envs",
        metavar="FOLDER|docker://REF",
        help="A folder holding certificates, or an image whose attestations to list.",
    ),
    key: Optional[Path] = typer.Option(
        None,
        "--key",
        help="With docker://REF: the signer's public key (KEY.pub); every attestation must verify with it.",
    ),
    insecure: bool = typer.Option(False, "--insecure", help="With docker://REF: plain HTTP or a self-signed registry."),
    require_pass: Optional[str] = typer.Option(
        None,
        "--require-pass",
        metavar="ARCH",
        help="With docker://REF and --key: exit 1 unless an attestation that verifies is a passing certificate of "
        "ARCH (a gate before a pod starts).",
    ),
    lock: Optional[Path] = typer.Option(
        None,
        "--lock",
        help="With --require-pass: also count a certificate of this lock (bare metal), once the image is proven the "
        "lock's (check --image --lock).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the list as JSON."),
) -> None:
    """List certificates, oldest first: when, arch, GPUs, result, headline figures; of an image, its attestations,
    verified."""
    if require_pass is not None and (key is None or not where.startswith("docker://")):
        fail(
            "--require-pass judges an image's signed attestations",
            "lockgen certs docker://HOST/REPO@sha256:HEX --key KEY.pub --require-pass ARCH",
            2,
        )
    if lock is not None and require_pass is None:
        fail(
            "--lock goes with --require-pass",
            "lockgen certs docker://REF --key KEY.pub --require-pass ARCH --lock LOCK",
            2,
        )
    if where.startswith("docker://"):
        return _attached(where, key, insecure, as_json, normalize_arch(require_pass) if require_pass else None, lock)
    if key is not None or insecure:
        fail("--key and --insecure go with docker://REF", "lockgen certs docker://HOST/REPO:TAG --key KEY.pub", 2)
    from lockgen.api.certs import folder_certificates

    found, inherited = folder_certificates(Path(where))
    if as_json:
        print_json(
            [{"certificate": str(path), **_entry(body)} for path, body in found]
            + [
                {
                    "certificate": str(path),
                    **_entry(body),
                    "inherited_by": str(team.team_lock),
                    "inherited": not team.changes,
                    "moved": team.changes,
                }
                for team in inherited
                for path, body in team.certificates
            ]
        )
        return
    if not found and not inherited:
        progress(f"no certificates under {where} (lockgen verify writes them to certs/ beside the lock, or --out)")
    for path, body in found:
        say(f"{_summary(body)}  {path}")
    for team in inherited:
        if not team.certificates and team.base_image:
            where = (
                f"lockgen certs {team.base_image}"
                if team.base_image.startswith("docker://")
                else "they are attached to it once it is pushed: lockgen certs docker://REF"
            )
            progress(
                f"{team.team_lock}: its base is the image {team.base_image}; its certificates are attestations "
                f"({where})"
                + (
                    ""
                    if not team.changes
                    else "; they do not cover this lock, which moved " + "; ".join(team.changes[:3])
                )
            )
        elif not team.certificates:
            progress(f"{team.team_lock}: the base lock it was held to ({team.base_lock}) has no certificate yet")
        elif team.changes:
            progress(
                f"{team.team_lock}: needs its own certification, the base's do not cover it: it moved "
                + "; ".join(team.changes[:3])
            )
        for path, body in team.certificates if not team.changes else ():
            say(f"{_summary(body)}  {path}  [inherited by {team.team_lock}: its CUDA stack is the base's]")


def _attached(
    reference: str,
    key: Optional[Path],
    insecure: bool,
    as_json: bool,
    require_pass: Optional[str],
    lock: Optional[Path],
) -> None:
    from lockgen.api.attestations import admitting

    admission = admitting(reference, key, insecure, lock if require_pass else None, progress)
    digest, found = admission.digest, admission.found
    if as_json:
        print_json(
            [
                {
                    "attestation": a.location,
                    "verified": a.verified,
                    "reason": a.reason,
                    "binding": a.binding,
                    "signature": a.signature,
                    **(_entry(a.body) if a.body else {}),
                }
                for a in found
            ]
        )
    else:
        for attached in found:
            if attached.verified:
                say(f"{_summary(attached.body)}  {attached.location}  [{attached.binding}; {attached.signature}]")
            else:
                say(f"REFUSED {attached.location}: {attached.reason}")
    refused = [a for a in found if not a.verified]
    if refused:
        fail(
            f"{len(refused)} of {len(found)} attestations attached to {digest[:23]}… do not verify: "
            f"{refused[0].reason}",
            "each REFUSED line says why; re-attest with `lockgen attest IMAGE CERT --key KEY`",
        )
    if not found:
        progress(f"no lockgen certificates are attached to {digest} (lockgen attest attaches them)")
        if key is not None:
            fail(
                f"nothing attached to {digest[:23]}… verifies with `{key}`",
                "attach one with lockgen attest IMAGE CERT --key KEY",
            )
    if require_pass:
        _require_pass(admission, require_pass, lock)


def _require_pass(admission: Admission, arch: str, lock: Optional[Path]) -> None:
    """The gate: a verified, passing certificate of `arch` among those that count (bound to the image's digest,
    or to `lock` once the image was proven the lock's)."""
    digest, proof = admission.digest, admission.proof
    if proof is not None and not proof.clean:
        for line in proof.lines():
            say(line)
        fail(
            f"{digest[:23]}… is not the image of {lock}: {proof.lines()[0]}",
            "its lock-bound certificates do not count: certify this image itself (lockgen verify --image) and "
            "attach that certificate",
        )
    if any(a.body is not None and a.body.passed and a.body.arch == arch for a in admission.counted):
        return
    carried = ", ".join(
        f"{a.body.arch} {'PASS' if a.body.passed else 'FAIL'}" for a in admission.found if a.body is not None
    )
    uncounted = [a for a in admission.found if a.verified and a not in admission.counted]
    why = (
        f"; {len(uncounted)} bound only to a lock, which count once the image is proven that lock's (--lock LOCK)"
        if uncounted and lock is None
        else ""
    )
    fail(
        f"no certificate attached to {digest[:23]}… passed on {arch} (it carries: {carried}){why}",
        f"certify the image on {arch} (lockgen verify --arch {arch} --image ...) and attach it: lockgen attest",
    )


@handles_errors
def attest(
    image: str = typer.Argument(
        ..., metavar="IMAGE", help="docker://HOST[:PORT]/REPO:TAG or docker://HOST/REPO@sha256:..."
    ),
    cert: Path = typer.Argument(
        ..., help="The certificate (lockgen verify); it must record this image, or the lock it was exported from."
    ),
    key: Path = typer.Option(
        ..., "--key", help="The Ed25519 private key to sign with (lockgen keygen); a signed certificate's own signer."
    ),
    sbom: Optional[Path] = typer.Option(
        None, "--sbom", help="Also attach the image's CycloneDX SBOM (sbom.cdx.json beside the layout export wrote)."
    ),
    insecure: bool = typer.Option(False, "--insecure", help="Plain HTTP or a self-signed registry (loopback tests)."),
    as_json: bool = typer.Option(
        False, "--json", help="Print one {digest, artifact_type, listed_by} per attached artifact."
    ),
) -> None:
    """Attach a certificate to its image as a signed in-toto attestation (an OCI 1.1 referrer); print its digest."""
    from lockgen.api.attestations import attest as run

    pushed = run(image, cert, key, sbom, insecure, progress)
    if as_json:
        print_json([entry.__dict__ for entry in pushed])
    else:
        for entry in pushed:
            say(entry.digest)
