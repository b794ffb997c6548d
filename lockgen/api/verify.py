"""Use case `lockgen verify`: run the kernel in an environment (a python, a prefix, an image) on this
machine's GPUs, judge what it saw, sign and write the certificate, and the renderings `--emit` asks for.

This path imports only light dependencies (pydantic, pyyaml, cryptography, and prometheus-client for
`--emit prom`; no rattler, no tomlkit), so `lockgen verify` runs on a GPU box with a few wheels carried.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lockgen import __version__
from lockgen.adapters import home, user_files
from lockgen.adapters.node import gpu_host, kernel, signing
from lockgen.adapters.pypi import python_dists
from lockgen.adapters.store import env_manifest
from lockgen.adapters.atomic_files import WRITABLE_HINT, check_writable, write_atomic
from lockgen.adapters.lock.lockfile_yaml import read_lock
from lockgen.api.steps.certificate_steps import read_numerics_references
from lockgen.api.steps.conformance_steps import conform, read_bundle, read_manifests
from lockgen.core.certificate.cert_formats import render_certificate, rendering_notes
from lockgen.core import nesting
from lockgen.core.certificate.certify import (
    build_body,
    expectations_from_lock,
    gpus_not_visible,
    refuse_wrong_hardware,
    wrong_world_size,
)
from lockgen.core.certificate.envelopes import conv_floors, node_floors
from lockgen.core.gpu.facts import arch_fact, load_facts
from lockgen.core.image.image_whole import environment_prefix
from lockgen.core.lock.lock_builder import LockgenMeta
from lockgen.core.certificate.numerics import NumericsReference, judge_against
from lockgen.core.stack.stack_layout import certificate_path
from lockgen.errors import LockFormatError, UserError
from lockgen.model.certificate import KERNEL_SCHEMA, CertificateBody, Hardware, KernelReport, ProvenConformance, Subject
from lockgen.model.certificate_time import created_text
from lockgen.model.json_values import JsonObject, list_at, text_at
from lockgen.model.inputs import BundleBytes
from lockgen.model.lock import LoadedLock
from lockgen.model.export_formats import LOCK_BOUND_FORMATS, NFD_VALID_FOR, valid_for_text
from lockgen.model.names import normalize_arch
from lockgen.model.oci import IMAGE_PREFIX, LOCK_LABEL, PREFIX_LABEL
from lockgen.model.requests import Environment, Image, Prefix, Python
from lockgen.model.results import Conformance, Verified

if (
    TYPE_CHECKING
):  # the image modules are imported where an image is verified: 0.5 s of lockgen's 1 s import before the kernel starts
    from lockgen.adapters.image import image_source


@dataclass(frozen=True)
class VerifyOptions:
    arch: str
    environment: Environment | None = None  # None: this interpreter's
    lock: Path | None = None
    expect: Path | None = None
    out: Path | None = None
    key: Path | None = None
    quick: bool = False
    compiled: bool = False
    allow_ptx: bool = False
    gpus: int | None = None
    timeout_s: float = 600
    nodes: int = 1
    rendezvous_endpoint: str | None = None
    rendezvous_id: str = "lockgen-verify"
    manifests: Path | None = None
    allow_foreign: tuple[str, ...] = ()
    emit: tuple[tuple[str, Path], ...] = ()  # (format, file): renderings written after the certificate
    valid_for: dt.timedelta = NFD_VALID_FOR  # an nfd rendering's lifetime
    expect_numerics: Path | None = (
        None  # the pinned fingerprints the run's must equal (a certificate, or {key, digests})
    )


@dataclass(frozen=True)
class _Run:
    """What one verify run was given, each input read once: the lock (None without `--lock`), the expectations
    (the lock's for this host's platform, then `--expect`), the rendezvous of several nodes, the manifests bundle,
    the pinned numerics fingerprints (`--expect-numerics`)."""

    lock: LoadedLock | None
    expected: JsonObject
    rendezvous: kernel.Rendezvous | None
    manifests: BundleBytes | None
    references: tuple[NumericsReference, ...] = ()


def verify(options: VerifyOptions, progress: Callable[[str], None]) -> Verified:
    """Runs the kernel in the environment, judges it, and writes the (signed) certificate. With an image,
    the kernel runs in the image's environment, unpacked (every layer checked, the environment digest
    recomputed), on this host's kernel and driver, as a container runtime would run it. The lock is read
    once, here, and every step takes it (its entries, and the sha256 of the bytes parsed)."""
    rendezvous = _rendezvous(options)
    loaded = read_lock(options.lock) if options.lock is not None else None
    # the cheap refusals (wrong arch, wrong platform) before any hashing
    references = (
        read_numerics_references(
            options.expect_numerics,
            signing.signer_public_key(options.key) if options.key is not None else {},
            "sign this run with the key that signed the reference (--key KEY), or pin the good node's `numerics` "
            "object instead",
        )
        if options.expect_numerics is not None
        else ()
    )
    given = _Run(
        loaded,
        _expectations(options, normalize_arch(options.arch), loaded),
        rendezvous,
        read_bundle(options.manifests),
        references,
    )
    _check_destinations(options)
    target = options.environment
    if not isinstance(target, Image):
        python = _interpreter(target)
        conformance = (
            _conformance(options, given.manifests, loaded, python_dists.prefix_of(python), None, progress)
            if loaded
            else None
        )
        return _verify(options, given, python, None, conformance, progress)
    from lockgen.adapters.image import image_source

    if loaded is not None:  # a lock whose packages cannot be proven is refused before the image is pulled and unpacked
        read_manifests(loaded, None, given.manifests, progress)
        return _verify_proven_image(options, given, loaded, target, progress)
    with image_source.unpacked(target.source, progress, target.insecure) as image:
        folder = image.prefix
        if image.environment != image.recorded_environment:
            raise LockFormatError(
                f"the environment in `{target.source}` (sha256:{image.environment[:16]}…) is not the one its "
                f"labels record (sha256:{image.recorded_environment[:16]}…)",
                "pass --lock to prove the image is a lock's, or re-export it from its lock",
            )
        return _verify(options, given, str(folder / "bin" / "python"), image, None, progress)


def _check_destinations(options: VerifyOptions) -> None:
    """Refuses, before the environment is proven and the kernel run, a certificate or `--emit` file that cannot be
    written, each named as given (never the write's temporary file): a run that could write none of its results,
    or only some of them, is not begun (a kernel started with lockgen is stopped as for any refusal)."""
    if options.out is not None:
        check_writable(options.out, f"--out {options.out}", WRITABLE_HINT, file=True)
    else:  # the folder the certificate goes to, named for this moment: the run's own name differs only in its time
        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        default = _certificate_path(options, normalize_arch(options.arch), stamp)
        check_writable(
            default,
            f"the certificate {default}",
            "pass --out FILE, or make that folder writable (a read-only mount, an immutable folder or its "
            "permissions); nothing was done",
            file=True,
        )
    for fmt, out in options.emit:
        check_writable(out, f"--emit {fmt}={out}", WRITABLE_HINT, file=True)


def _certificate_path(options: VerifyOptions, arch: str, stamp: str) -> Path:
    """Where the certificate goes: `--out`, else `certs/` beside the lock, else the working folder."""
    return options.out or certificate_path(options.lock.resolve() if options.lock else None, arch, stamp, Path.cwd())


def _interpreter(target: Prefix | Python | None) -> str:
    """The interpreter the kernel runs on: a prefix's `bin/python`, the one named, else this one."""
    if isinstance(target, Prefix):
        return str(target.path / "bin" / "python")
    return target.interpreter if target is not None else sys.executable


def _verify_proven_image(
    options: VerifyOptions, given: _Run, loaded: LoadedLock, target: Image, progress: Callable[[str], None]
) -> Verified:
    """The kernel run in an image proven whole to be the lock's first (`check --image --lock`: the environment
    its config runs, the config, every file outside it), in the same unpacked root."""
    from lockgen.adapters.image import image_source
    from lockgen.api.steps.image_proof_steps import prove_opened

    with image_source.opened(target.source, progress, target.insecure) as opened:
        proven = prove_opened(
            loaded, opened, target.source, given.manifests, None, None, progress, None, options.allow_foreign
        )
        _require_clean(
            proven,
            f"{target.source} is not the image of {options.lock}",
            f"see lockgen check --image {target.source} --lock {options.lock}; certify only an image that conforms",
        )
        progress(
            f"the image is the lock's, whole: {proven.report.counts['ok']} packages, its config and every file "
            "outside its environment"
        )
        image = image_source.lockgen_image(opened, environment_prefix(opened.typed_config, None))
        return _verify(options, given, str(image.prefix / "bin" / "python"), image, proven, progress)


def _require_clean(result: Conformance, what: str, hint: str) -> None:
    """Refuses to run the kernel where the conformance found anything: `what`, the first finding and how many more."""
    if not result.clean:
        lines = result.lines()
        raise UserError(f"{what}: {lines[0]}" + (f" (and {len(lines) - 1} more)" if len(lines) > 1 else ""), hint)


def _conformance(
    options: VerifyOptions,
    manifests: BundleBytes | None,
    loaded: LoadedLock,
    prefix: Path,
    final_prefix: str | None,
    progress: Callable[[str], None],
) -> Conformance:
    """The environment must be the lock's before the kernel runs in it; one on disk (no `final_prefix`: not
    an unpacked image) checked before is proven by the fingerprints of its files where they did not move."""
    result = conform(
        loaded,
        prefix,
        None,
        manifests,
        progress,
        final_prefix=final_prefix,
        allow_foreign=options.allow_foreign,
        fingerprints=final_prefix is None,
    )
    _require_clean(
        result,
        f"{final_prefix or prefix} is not the environment of {options.lock}",
        f"see lockgen check --lock {options.lock}; certify only an environment that conforms",
    )
    progress(f"conforms to {options.lock}: {result.report.counts['ok']} packages, every file accounted for")
    return result


def _verify(
    options: VerifyOptions,
    given: _Run,
    python: str,
    image: image_source.UnpackedImage | None,
    conformance: Conformance | None,
    progress: Callable[[str], None],
) -> Verified:
    started = dt.datetime.now(dt.timezone.utc)
    arch, rendezvous = normalize_arch(options.arch), given.rendezvous
    if arch != "cpu":
        arch_fact(load_facts(), arch)
    lock = given.lock.lock if given.lock else None
    lock_sha256 = given.lock.sha256 if given.lock else image.labels.get(LOCK_LABEL) if image else None
    bound = [fmt for fmt, _ in options.emit if fmt in LOCK_BOUND_FORMATS]
    if lock_sha256 is None and bound:
        raise UserError(
            f"--emit {bound[0]} names the lock the node is certified for, and this run has none",
            "pass --lock LOCK (or --image of an image lockgen exported from a lock)",
        )
    expected = dict(given.expected)
    host = gpu_host.probe() if arch != "cpu" else None
    if arch != "cpu":
        refuse_wrong_hardware(
            arch,
            host.names if host else (),
            host.compute_capabilities if host else (),
            host.driver if host else None,
            text_at(expected, "driver_min"),
        )
        expected.setdefault("gpu_count", options.gpus if options.gpus is not None else (host.count if host else 0))
    expected.setdefault("conv_floor_tflops", dict(conv_floors(arch)))
    expected.setdefault("node", dict(node_floors(arch)))
    progress(f"verifying {arch} with {python}" + (f" against {options.lock}" if options.lock else ""))
    single_doc, single_raw = kernel.run_single(
        python, arch, expected, options.quick, options.compiled, options.allow_ptx, options.timeout_s, progress
    )
    single = _report(single_doc, "single")
    gpus = options.gpus if options.gpus is not None else (host.count if host else 1)
    world = gpus * options.nodes
    distributed, digests = None, {"single": hashlib.sha256(single_raw).hexdigest()}
    hidden = gpus_not_visible(arch, gpus, single.stack)
    extra = [hidden] if hidden else []
    if hidden is None and world > 1:
        progress(
            f"running the {gpus}-GPU checks under torchrun"
            + (f", one node of {options.nodes} meeting at {rendezvous.endpoint}" if rendezvous else "")
        )
        sizes = "1,16" if arch == "cpu" else "1,16,128,1024"  # gloo on CPUs: small sizes say enough
        dist_doc, dist_raw = kernel.run_distributed(
            python, gpus, sizes, options.timeout_s, progress, rendezvous=rendezvous, cpu=arch == "cpu"
        )
        distributed = _report(dist_doc, "distributed")
        digests["distributed"] = hashlib.sha256(dist_raw).hexdigest()
    not_run = None
    if world == 1:
        not_run = "one GPU: the all-reduce (bandwidth, small-message latency) and DDP checks need two or more"
    wrong = (
        wrong_world_size(distributed.world_size, gpus, options.nodes, rendezvous is not None) if distributed else None
    )
    extra += [wrong] if wrong else []
    tree = None if image else _recorded_tree(python, damaged_is_none=conformance is not None)
    body = build_body(
        created=created_text(started),  # the rule every reader holds it to (strftime writes year 1 as `1`)
        tool=f"lockgen {__version__}",
        arch=arch,
        mode="quick" if options.quick else "full",
        subject=Subject(
            stack=LockgenMeta(lock).stack if lock else None,
            target=LockgenMeta(lock).target if lock else None,
            environment_digest=(
                conformance.expected_digest
                if conformance
                else image.recorded_environment
                if image
                else tree.digest
                if tree
                else None
            ),
            lock_path=str(options.lock) if options.lock else None,
            lock_sha256=lock_sha256,
            image_digest=image.digest if image else None,
            python=f"{image.labels.get(PREFIX_LABEL, IMAGE_PREFIX)}/bin/python" if image else python,
            conformance=_conformance_record(conformance),
        ),
        hardware=_hardware(host, single),
        single=single,
        distributed=distributed,
        kernel_sha256=digests,
        extra_checks=extra,
        rendezvous=rendezvous.endpoint if rendezvous else None,
        collectives_not_run=not_run,
        references=given.references,
        numerics_environment=_numerics_environment(image, tree, lock_sha256),
        duration_s=round((dt.datetime.now(dt.timezone.utc) - started).total_seconds(), 1),
    )
    printed = {(c.category, c.name) for report in (single, distributed) if report for c in report.checks}
    for check in body.checks:  # the kernel printed its own checks as it ran them; these lockgen judged after
        if (check.category, check.name) not in printed:
            progress(f"  {check.line()}")
    path = _certificate_path(options, arch, started.strftime("%Y%m%dT%H%M%SZ"))
    data = body.model_dump(mode="json", by_alias=True)
    unsigned: JsonObject = {"certificate": data, "signature": None}
    write_atomic(path, signing.signed_file(data, options.key) if options.key else signing.render(unsigned))
    _emit(body, path, options, given.references, progress)
    return Verified(path, body)


def _emit(
    body: CertificateBody,
    certificate: Path,
    options: VerifyOptions,
    references: tuple[NumericsReference, ...],
    progress: Callable[[str], None],
) -> None:
    """The certificate's renderings for fleet tools, each written atomically; all are rendered before the
    first is written, so a rendering that fails leaves every file as it was (the certificate stays). A write
    that fails even so (their destinations were checked before the run: a disk that filled meanwhile) says which
    files were written. With pinned numerics references, each says how the fingerprint compares apart (the check
    is in the body already)."""
    judgement = judge_against(body.numerics, body.stack, references) if references else None
    renderings = [(fmt, out, render_certificate(body, fmt, options.valid_for, judgement)) for fmt, out in options.emit]
    written = [f"the certificate {certificate}"]
    for fmt, out, text in renderings:
        try:
            write_atomic(out, text)
        except (OSError, UserError) as exc:
            why = exc.message if isinstance(exc, UserError) else exc.strerror or str(exc)
            raise UserError(
                f"--emit {fmt}={out} was not written ({why}); written: {', '.join(written)}",
                f"free space there or choose another path, then render what is missing from the certificate: "
                f"lockgen cert export {certificate} --format {fmt} --out FILE{_export_options(fmt, options)}",
            ) from None
        written.append(f"{fmt} {out}")
        progress(f"wrote {fmt} {out}")
        for note in rendering_notes(body, fmt, out, dt.datetime.now(dt.timezone.utc), options.valid_for):
            progress(f"note: {note}")


def _export_options(fmt: str, options: VerifyOptions) -> str:
    """The options that make `cert export` render `fmt` as this run did: the signer's public key (`keygen` writes
    it beside the private key, as KEY.pub; a signed certificate is refused without it), an nfd rendering's
    lifetime, the pinned numerics references."""
    key = f" --key {options.key.with_name(options.key.name + '.pub')}" if options.key is not None else ""
    valid_for = f" --valid-for {valid_for_text(options.valid_for)}" if fmt == "nfd" else ""
    references = f" --expect-numerics {options.expect_numerics}" if options.expect_numerics is not None else ""
    return key + valid_for + references


def _conformance_record(conformance: Conformance | None) -> ProvenConformance | None:
    if conformance is None:
        return None
    counts = conformance.report.counts
    return ProvenConformance(
        clean=conformance.clean,
        expected_digest=conformance.expected_digest,
        platform=conformance.platform,
        packages=counts["packages"],
        files_expected=counts["files_expected"],
        files_observed=counts["files_observed"],
        accepted_by_rule=counts["accepted"],
        checked_at=conformance.where,
        allowed_foreign=dict(conformance.allowed),
        by_path_only=conformance.by_path_only,
    )


def _rendezvous(options: VerifyOptions) -> kernel.Rendezvous | None:
    """Several nodes need an endpoint every node names alike; one node needs none."""
    if options.nodes < 1:
        raise UserError(f"--nodes {options.nodes} is not a node count", "pass --nodes 1 or more")
    if options.nodes == 1:
        if options.rendezvous_endpoint:
            raise UserError("--rendezvous is for several nodes", "pass --nodes N with it, or leave it out")
        return None
    if not options.rendezvous_endpoint:
        raise UserError(
            f"--nodes {options.nodes} needs a rendezvous endpoint",
            "pass --rendezvous HOST:PORT, the same on every node (HOST: one of the nodes)",
        )
    return kernel.Rendezvous(options.nodes, options.rendezvous_endpoint, options.rendezvous_id)


def _expectations(options: VerifyOptions, arch: str, loaded: LoadedLock | None) -> JsonObject:
    """What the environment must hold: from the lock (for this host's platform), then `--expect`."""
    expected: JsonObject = {}
    if loaded is not None:
        lock = loaded.lock
        locked_arch = LockgenMeta(lock).arch
        if locked_arch and locked_arch != arch:
            raise UserError(f"the lock is for {locked_arch}, not {arch}", f"pass --arch {locked_arch}")
        platform = home.native_platform("linux-64")
        if platform not in lock.metadata.platforms:
            raise UserError(
                f"the lock has no {platform} packages (it covers {', '.join(lock.metadata.platforms)})",
                "certify on a host of the lock's platform",
            )
        expected = expectations_from_lock(lock, platform)
    if options.expect:
        try:
            given = nesting.loads(user_files.read_bytes(options.expect, user_files.STACK_LIMIT, "expectations file"))
        except (OSError, ValueError) as exc:
            raise UserError(f"cannot read expectations `{options.expect}`: {exc}", "pass a JSON object") from None
        if not isinstance(given, dict):
            raise UserError(f"expectations `{options.expect}` are not a JSON object", "pass a JSON object")
        expected.update(given)
    return expected


@dataclass(frozen=True)
class _RecordedTree:
    """What a lockgen environment's manifest records of itself: its digest and the lock it was made from."""

    digest: str | None
    lock_sha256: str | None


def _recorded_tree(python: str, damaged_is_none: bool) -> _RecordedTree | None:
    """The record of the materialized environment the interpreter belongs to, when it is one. A damaged record
    is refused (the only digest a run without `--lock` has), or with `damaged_is_none` (the environment just
    proven its lock's, file by file) taken as none."""
    prefix = Path(python).absolute().parent.parent
    if not (prefix / env_manifest.MANIFEST).is_file():
        return None
    try:
        manifest = env_manifest.read(prefix)[0]
    except UserError:
        if damaged_is_none:
            return None
        raise
    digest, lock = manifest.get("environment_digest"), manifest.get("lock_sha256")
    return _RecordedTree(digest if isinstance(digest, str) else None, lock if isinstance(lock, str) else None)


def _numerics_environment(
    image: image_source.UnpackedImage | None, tree: _RecordedTree | None, lock_sha256: str | None
) -> str | None:
    """The environment part of the numerics key: the digest of the tree the kernel ran in, the same whether the
    run was given `--lock` or only `--python`/`--image` (issue 48: one node's fingerprints fell under two keys).
    The subject's digest differs by design: with `--lock` it is the lock's expected environment (what
    `check --lock` proves, prefix-free for PyPI locks), without it the environment's own record (`lockgen
    materialize`'s, an image's label). A fingerprint is of the tree, so both runs take the tree's: an image's
    label (without --lock checked against its unpacked tree, with it the image proven the lock's whole), or a
    prefix's manifest, when it records this lock (else the subject's digest: a venv lockgen did not make)."""
    if image is not None:
        return image.recorded_environment
    if tree is not None and tree.digest is not None and (lock_sha256 is None or tree.lock_sha256 == lock_sha256):
        return tree.digest
    return None


def _report(document: JsonObject, kind: str) -> KernelReport:
    try:
        report = KernelReport.from_json(document)
    except Exception as exc:  # pydantic's ValidationError: the kernel and lockgen disagree on the schema
        raise LockFormatError(
            f"the {kind} kernel's JSON does not match lockgen's model: {str(exc).splitlines()[0]}",
            "use the verify/ kernel shipped with this lockgen",
        ) from None
    if report.schema_ != KERNEL_SCHEMA:
        raise LockFormatError(
            f"the kernel wrote schema {report.schema_!r}", "use the verify/ kernel shipped with this lockgen"
        )
    return report


def _hardware(host: gpu_host.HostGpus | None, single: KernelReport) -> Hardware:
    stack = single.stack or {}
    names = host.names if host else tuple(str(d.get("name")) for d in list_at(stack, "devices") if isinstance(d, dict))
    return Hardware(
        gpu_names=tuple(names),
        gpu_count=len(names),
        compute_capability=(host.compute_capabilities[0] if host and host.count else None),
        driver=host.driver if host else text_at(stack, "driver"),
        interconnect=host.interconnect if host else "none",
        topology=host.topology if host else "",
        host_platform=home.system_and_machine(),
    )
