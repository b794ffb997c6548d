"""A step below the use cases (check, verify, export): the conformance of an environment on disk to its
lock, every path accounted for by a locked package's own manifest or a named rule (and, for a lock with
`[image] services`, lockgen's launcher and services.json, checked byte for byte against what the lock states).

An environment that stays (`fingerprints`) and passed before against the same lock is proven by one stat
walk when nothing in it moved (`conformance_store`'s verdict); the lock parser, the manifests and the rules
are imported only when the work is done, since a repeated health check is otherwise mostly imports.
A lock's local packages (`check --lock` of a prefix, the lock in its stack's locks/) have no published file to
prove them by: each is proven as far as it can be and said on a line (`_local_proof`)."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from lockgen import __version__
from lockgen.adapters import home, parallel
from lockgen.adapters.proof import conformance_store, prefix_observer, stat_walk
from lockgen.core.env.conformance import passing_record, passing_report
from lockgen.errors import HostError, LockgenError, UserError
from lockgen.model.results import Conformance

if TYPE_CHECKING:
    from lockgen.api.steps.shared_steps import Meter
    from lockgen.model.inputs import BundleBytes, LockBytes
    from lockgen.core.env.conformance import ExpectedPackage
    from lockgen.model.lock import LoadedLock, LockedPackage
ALLOWED_FOREIGN = "allowed foreign files"
SERVICES_PACKAGE = "lockgen [image] services"  # the service launcher and services.json, checked against the lock
CARRIED_LOCK = "the image's own lock"  # .lockgen/lock.conda-lock.yml, which must be the lock checked against


def read_bundle(path: Path | None) -> BundleBytes | None:
    """The `--manifests` bundle's bytes, read once for the command (None without one)."""
    if path is None:
        return None
    from lockgen.adapters.lock import lock_file

    return lock_file.read_bundle(path)


def read_manifests(
    loaded: LoadedLock, platform: str | None, manifests: BundleBytes | None, progress: Callable[[str], None]
) -> None:
    """Every locked package's manifest read (and kept), each checked against the hash the lock pins: run before
    an image is pulled and unpacked, a lock whose packages cannot be proven is refused before that work, and
    `conform` then finds each manifest kept."""
    from lockgen.adapters.proof import manifest_store
    from lockgen.api.steps.manifest_steps import expected_manifests
    from lockgen.api.steps.materialize_steps import lock_platform

    lock = loaded.lock
    bundle = manifest_store.parse_bundle(manifests.data, manifests.source) if manifests is not None else {}
    chosen = lock_platform(lock, platform)
    expected_manifests(lock, chosen, bundle, lambda _: None)  # said once, here; conform's own read finds them kept
    progress(
        f"the manifests of the lock's {len(lock.packages_for(chosen))} packages are at hand (each checked "
        "against its pinned hash)"
    )


def conform(
    lock: LockBytes | LoadedLock,
    prefix: Path,
    platform: str | None,
    manifests: BundleBytes | None,
    progress: Callable[[str], None],
    meter: Meter | None = None,
    final_prefix: str | None = None,
    allow_foreign: Sequence[str] = (),
    carried_lock: bool = True,
    fingerprints: bool = False,
    interpreter: str | None = None,
    local_from: Path | None = None,
) -> Conformance:
    """The conformance of the environment at `prefix` (installed for `final_prefix`, default `prefix`) to the lock
    its use case read (its bytes; parsed here only when the work is done, unless the caller parsed it already).
    `allow_foreign` names files no package states that the caller accepts (a site's CA hook, a venv seed):
    they are hashed and recorded, and their byte code counts as theirs. `fingerprints`: for an environment
    that stays (not an image unpacked for one check), a tree whose stat walk is what the last passing check
    of it against this lock saw is that check's verdict, and otherwise files whose fingerprint is what an
    earlier check kept are not read again (`conformance_store`). `interpreter`: the Python a venv runs, held to the
    lock's exact one where it names one (`lockgen.interpreter.<platform>`); a kept verdict stands only for the
    same interpreter file. `local_from`: the folder of the stack whose locks/ holds the lock, where its local
    packages are (`_local_proof`); without it a lock with a local package is refused. A check that met a local
    package keeps no verdict: what it proved rests on a folder outside the environment's stat walk."""
    if not prefix.is_dir():
        raise UserError(f"{prefix} is not a folder", "pass the environment's prefix (the folder holding bin/ and lib/)")
    context = _verdict_context(prefix, platform, manifests, final_prefix, allow_foreign, carried_lock) + (
        [_interpreter_file(interpreter)] if interpreter is not None else []
    )
    # what a check that read every byte kept stands for a while (`LOCKGEN_STAT_TRUST_S`), then every byte is read again
    trust = conformance_store.byte_trust(prefix, lock.sha256) if fingerprints else None
    standing = (
        trust.read if trust is not None and not trust.expired else None
    )  # that full read, while its keepings stand
    started = trust.now if trust is not None else time.time()
    read_every_byte = conformance_store.shown_time(standing if standing is not None else started)
    if trust is not None and trust.read is not None and standing is None:  # a first check reads every byte anyway
        progress(
            f"reading every byte of {prefix}: last read whole {conformance_store.shown_time(trust.read)}, past "
            f"the stat trust window ({conformance_store.TRUST_ENV})"
        )
    kept = conformance_store.load_verdict(prefix, lock.sha256, context) if standing is not None else None
    # before any file is read; the walk kept for the work when no verdict could stand (a first check: walked once)
    tree = stat_walk.tree_fingerprint(prefix, keep_walk=kept is None) if fingerprints else None
    again = (
        _kept_verdict(lock.sha256, kept, prefix, tree, progress, context)
        if kept is not None and tree is not None
        else None
    )
    if again is not None:
        return replace(again, read_every_byte=read_every_byte)
    result = _conform(
        lock,
        prefix,
        platform,
        manifests,
        progress,
        meter,
        final_prefix,
        allow_foreign,
        carried_lock,
        fingerprints,
        tree,
        standing is not None,
        interpreter,
        local_from,
    )
    if (
        trust is not None and standing is None
    ):  # every byte read, and what was read kept (`_conform` saves the fingerprints)
        conformance_store.every_byte_read(prefix, lock.sha256, started)
    result = replace(result, read_every_byte=read_every_byte)
    if not result.clean:  # also after `--full`, which can find what no stat shows (a write below the file system)
        conformance_store.drop_verdict(prefix, result.lock_sha256, context)
    elif tree is not None and tree.settled and not result.local:
        conformance_store.save_verdict(
            prefix,
            result.lock_sha256,
            context,
            tree,
            {
                "platform": result.platform,
                "expected_digest": result.expected_digest,
                "allowed": result.allowed,
                "by_path_only": result.by_path_only,
                "report": passing_record(result.report),
            },
        )
    return result


def _verdict_context(
    prefix: Path,
    platform: str | None,
    manifests: BundleBytes | None,
    final_prefix: str | None,
    allow_foreign: Sequence[str],
    carried_lock: bool,
) -> list[str]:
    """What a kept verdict is bound to besides the lock's bytes and the tree: the check's inputs."""
    bundle = manifests.data if manifests is not None else None  # a verdict reached with a bundle is bound to its bytes
    return [
        platform or "",
        home.machine(),
        final_prefix or str(prefix),
        "\0".join(sorted(set(allow_foreign))),
        str(carried_lock),
        hashlib.sha256(bundle).hexdigest() if bundle is not None else "",
        __version__,
    ]


def kept_conformance(
    lock: LockBytes, prefix: Path, platform: str | None, progress: Callable[[str], None]
) -> Conformance | None:
    """`conform` of the environment at `prefix` with no bundle and nothing allowed, when the verdict of its last
    passing check against these lock bytes stands (its stat walk unchanged: said, as `conform` says it); None,
    with nothing said, for anything else, which `conform` decides."""
    if not prefix.is_dir():
        return None
    trust = conformance_store.byte_trust(prefix, lock.sha256)
    if trust.read is None or trust.expired:  # past the stat trust window: `conform` reads every byte, and says so
        return None
    context = _verdict_context(prefix, platform, None, None, (), True)
    kept = conformance_store.load_verdict(prefix, lock.sha256, context)
    if kept is None:
        return None
    try:
        tree = stat_walk.tree_fingerprint(prefix)
    except OSError:  # gone or unreadable meanwhile: conform says which
        return None
    again = _kept_verdict(lock.sha256, kept, prefix, tree, progress, context)
    return replace(again, read_every_byte=conformance_store.shown_time(trust.read)) if again is not None else None


def _kept_verdict(
    lock_sha256: str,
    kept: dict,
    prefix: Path,
    tree: stat_walk.TreeFingerprint,
    progress: Callable[[str], None],
    context: list[str],
) -> Conformance | None:
    """The verdict `kept` by the last passing check of this tree against these lock bytes (and `context`), when its
    stat walk is unchanged but for files whose ctime moved with their link count (another environment sharing them
    was made or removed); None when anything else moved or the record is not usable."""
    verdict, report = kept["verdict"], passing_report(kept["verdict"].get("report"))
    allowed = verdict.get("allowed")
    if (
        report is None
        or not isinstance(verdict.get("platform"), str)
        or not isinstance(verdict.get("expected_digest"), str)
        or type(verdict.get("by_path_only")) is not int
        or not isinstance(allowed, dict)
        or not all(isinstance(v, (str, type(None))) for v in allowed.values())
    ):
        return None
    linked = conformance_store.standing(kept, tree)
    if linked is None:
        return None
    if linked and tree.settled:  # the link counts of now kept, so that an edit putting size and mtime back is seen
        again = stat_walk.tree_fingerprint(prefix, keep_walk=True)
        if again.digest == tree.digest and again.stamps == tree.stamps:
            conformance_store.renew(prefix, lock_sha256, context, kept, again)
    moved = (
        f" but the link counts of {linked} (another environment sharing them was made or removed: no edit, 0 "
        "files read)"
        if linked
        else ""
    )
    progress(
        f"{tree.paths} paths of {prefix} proven by their fingerprints: none moved since the passing check of "
        f"{kept.get('checked')}{moved} (check --lock --full reads every file)"
    )
    return Conformance(
        lock_sha256,
        verdict["platform"],
        str(prefix),
        verdict["expected_digest"],
        report,
        allowed=dict(allowed),
        by_path_only=verdict["by_path_only"],
    )


def _conform(
    given: LockBytes | LoadedLock,
    prefix: Path,
    platform: str | None,
    manifests: BundleBytes | None,
    progress: Callable[[str], None],
    meter: Meter | None,
    final_prefix: str | None,
    allow_foreign: Sequence[str],
    carried_lock: bool,
    fingerprints: bool,
    tree: stat_walk.TreeFingerprint | None,
    trusted: bool,
    interpreter: str | None = None,
    local_from: Path | None = None,
) -> Conformance:
    """The work of `conform`: every locked package's expected files against the prefix as found (by the stat
    walk of `tree` when the verdict was looked up with one: taken before any file was read, walked once); kept
    fingerprints spare a file its read only when `trusted` (within the stat trust window), and are kept anew
    when `fingerprints`."""
    from hashlib import sha256
    from stat import S_ISREG

    from lockgen.adapters.proof import bytecode_proof, manifest_store
    from lockgen.adapters.lock.lockfile_yaml import parsed
    from lockgen.api.steps.manifest_steps import expected_packages
    from lockgen.api.steps.materialize_steps import lock_platform
    from lockgen.core.env.conformance import ExpectedFile, ExpectedPackage, compare, launcher_targets, pyc_pairs
    from lockgen.core.env.expected_env import expected_digest, lock_python, site_packages_of
    from lockgen.core.image.image_config import service_files
    from lockgen.model.oci import LOCK_INSIDE

    loaded = parsed(given)
    lock, lock_sha256 = loaded.lock, loaded.sha256
    chosen = lock_platform(lock, platform)
    if interpreter is not None:
        _runs_the_locked_python(loaded, chosen, prefix, interpreter)
    kept = conformance_store.load(prefix, lock_sha256) if fingerprints and trusted else {}
    walked = tree.walked if tree is not None and tree.walked is not None else prefix_observer.walk(prefix)
    with ExitStack() as meanwhile:  # work the other cores do meanwhile (`parallel.Forked`), waited for at its end
        ahead = meanwhile.enter_context(prefix_observer.likely_wanted(prefix, walked, kept))  # hashing the files
        bundle = manifest_store.parse_bundle(manifests.data, manifests.source) if manifests is not None else {}
        expected = expected_packages(
            lock, chosen, final_prefix or str(prefix), bundle, progress, published_only=local_from is not None
        )
        digest = meanwhile.enter_context(parallel.Forked(partial(expected_digest, expected)))
        python = lock_python(lock, chosen)
        local = _local_proof(lock.packages_for(chosen), local_from, prefix, python) if local_from else _LocalProof()
        mine = expected + local.expected  # the published packages' expected digest, the local ones beside it
        allowed = sorted(set(allow_foreign))
        services = {path: sha256(data).hexdigest() for path, data in service_files(lock).items()}
        # `carried_lock` false: an export about to write its own (re-adopting a lockgen image under a new lock)
        carried = {LOCK_INSIDE: lock_sha256} if carried_lock and (prefix / LOCK_INSIDE).is_file() else {}
        stated = (
            {f.path for p in mine for f in p.files if f.sha256 is not None}
            | set(allowed)
            | set(services)
            | set(carried)
        )
        # byte code is hashed with the rest (ahead, on every core) and trusted by its fingerprint later, as a stated
        # file is: its proof against its source is keyed by both sha256s (`bytecode_proof`)
        byte_code = {
            path
            for path, info in walked.items()
            if path.endswith(".pyc") and "__pycache__/" in path and S_ISREG(info.st_mode)
        }
        wanted = stated | byte_code
        proofs = dict(kept) if fingerprints else None
        said = f"the {len(stated)} files the packages state" + (
            f" and {len(byte_code)} byte-code files" if byte_code else ""
        )
        progress(
            f"hashing {said} in {prefix}"
            + (f" (those whose fingerprint moved since the last check: {len(kept)} kept)" if kept else "")
        )
        seen: dict[str, list] = {}
        observed = prefix_observer.observe(
            prefix,
            wanted,
            meter,
            read_these=launcher_targets(mine).keys(),
            proofs=proofs,
            walked=walked,
            seen=seen,
            ahead=ahead,
        )
        if proofs is not None and proofs != kept:
            meanwhile.enter_context(conformance_store.saving(prefix, lock_sha256, proofs))
        found = {o.path: o.sha256 for o in observed} if allowed else {}
        hook = (
            [
                ExpectedPackage(
                    ALLOWED_FOREIGN,
                    tuple(ExpectedFile(path, found[path], None) for path in allowed if path in found),
                    locked=False,
                )
            ]
            if allowed
            else []
        )
        # `[image] services`: the launcher and services.json an image holds are the lock's, byte for byte
        hook += (
            [
                ExpectedPackage(
                    SERVICES_PACKAGE, tuple(ExpectedFile(p, d, None) for p, d in services.items()), locked=False
                )
            ]
            if services
            else []
        )
        # the lock an image carries (a team stack's `extends` reads it) must be this lock, byte for byte
        hook += (
            [ExpectedPackage(CARRIED_LOCK, tuple(ExpectedFile(p, d, None) for p, d in carried.items()), locked=False)]
            if carried
            else []
        )
        pairs = pyc_pairs(mine, observed)
        unproven = bytecode_proof.unproven(
            prefix, pairs, progress, {o.path: o.sha256 for o in observed if o.sha256} if pairs else {}
        )  # sources and byte code: just hashed
        report = compare(
            mine + hook, observed, site_packages_of(python) if python else "", final_prefix or str(prefix), unproven
        )
        by_path_only = sum(1 for p in mine for f in p.files if f.kind == "file" and f.sha256 is None)
        expected_sha256 = digest.result() or expected_digest(expected)
    return Conformance(
        lock_sha256,
        chosen,
        str(prefix),
        expected_sha256,
        report,
        problems=tuple(local.problems),
        allowed={path: found.get(path) for path in allowed},
        by_path_only=by_path_only,
        hashes=seen,
        local=tuple(local.lines),
    )


@dataclass(frozen=True)
class _LocalProof:
    """What `check --lock` of a prefix finds of the lock's local packages: their files as expected (a rebuilt
    wheel's, or the install's own RECORD: editable, or where the check fails anyway), a line each saying what was
    proven and what could not be, and the findings that fail the check."""

    expected: list[ExpectedPackage] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _local_proof(
    packages: Sequence[LockedPackage], stack_folder: Path, prefix: Path, python: str | None
) -> _LocalProof:
    """Each local package of `packages` (the rest are proven by their published files), as far as it can be proven.
    Built: against a wheel built again from its folder when that folder's tree is the one the lock pins (trusting
    the build backend to build the same files from the same tree); else (the tree changed, or the build failed)
    a finding: the install's own RECORD proves nothing, whoever changed its files could change it too. Editable: its
    code is read from its folder, so not provable by content; what is proven is that it was installed editable
    from the locked folder (direct_url.json), that the folder's pyproject.toml is the one the lock pins, and that
    its RECORD holds only what an editable install writes (its dist-info, one .pth naming that folder): any
    of these wrong fails."""
    from lockgen.adapters.pypi import local_source
    from lockgen.core.env.expected_env import wheel_expected
    from lockgen.core.lock.lock_builder import local_of

    proof = _LocalProof()
    for package in packages:
        local = local_of(package)
        if local is None:
            continue
        relative, editable = local
        key = f"local package {package.name} {package.version} ({'editable' if editable else 'built'}, {relative})"
        try:
            installed = local_source.installed_expected(prefix, package)
        except LockgenError:
            proof.problems.append(f"missing package {package.name} {package.version} ({key})")
            continue
        changed = local_source.changed(stack_folder, package)
        if editable:
            proof.expected.append(installed)
            origin = _editable_folder(local_source.installed_origin(prefix, package))
            folder = None if changed else local_source.folder_of(stack_folder, relative, package.name)
            if changed:
                proof.problems.append(f"{changed}, and the environment reads the package from that folder")
            elif origin != str(folder):
                proof.problems.append(f"{key} is not installed editable from that folder ({origin or 'no folder'})")
            beyond = local_source.editable_findings(prefix, installed, folder) if folder else []
            proof.problems.extend(beyond)
            proven = f"; proven: installed editable from {folder}, whose pyproject.toml is the locked one"
            proof.lines.append(
                f"{key}: not provable by content: its code is read from its folder; its dist-info and its .pth "
                "(one line naming that folder) are the install's own, held to the RECORD it wrote"
                + ("" if changed or origin != str(folder) or beyond else proven)
            )
            continue
        if changed:  # the RECORD its install wrote is no proof: whoever changed its files could change it too
            proof.expected.append(installed)
            proof.problems.append(
                f"{key}: not provable: {changed}, so the tree the lock pins cannot be built again to compare "
                "(restore that folder to the locked tree, or lock it again and materialize a fresh prefix)"
            )
            continue
        try:
            manifest = local_source.rebuilt_manifest(
                local_source.folder_of(stack_folder, relative, package.name), package
            )
        except HostError as exc:  # the build backend cannot be had here (no index), or the build failed
            proof.expected.append(installed)
            proof.problems.append(
                f"{key}: not provable: building it again failed ({exc.message}; check where its build backend "
                "can be had), and the RECORD its install wrote is no proof"
            )
            continue
        proof.expected.append(wheel_expected(manifest, python or ""))
        proof.lines.append(
            f"{key}: proven against a wheel built again from its folder, whose source tree is the one the lock pins "
            f"(sha256:{package.hash.sha256 or ''}), trusting its build backend to build the same files from it"
        )
    return proof


def _editable_folder(origin: object) -> str | None:
    """The local folder a PEP 610 `direct_url.json` says an editable install reads, else None."""
    if not isinstance(origin, dict) or not isinstance(origin.get("url"), str):
        return None
    info = origin.get("dir_info")
    parts = urlsplit(origin["url"])
    if parts.scheme != "file" or not isinstance(info, dict) or info.get("editable") is not True:
        return None
    return unquote(parts.path)


def _interpreter_file(interpreter: str) -> str:
    """The file a venv's interpreter is, its links followed, by path, size and mtime (a stat, no run)."""
    try:
        real = Path(interpreter).resolve()
        info = real.stat()
    except OSError:
        return f"{interpreter}: missing"
    return f"{real}:{info.st_size}:{info.st_mtime_ns}"


def _runs_the_locked_python(loaded: LoadedLock, platform: str, prefix: Path, interpreter: str) -> None:
    """Refuses a venv whose interpreter, asked (`pyvenv.cfg` keeps what it was made with, not what runs), is not
    the exact Python the lock was made for, where it names one (a stack's `python = "X.Y.Z"`)."""
    from lockgen.adapters.store.installers import interpreter_version
    from lockgen.core.lock.lock_builder import LockgenMeta

    exact = LockgenMeta(loaded.lock).interpreter(platform)
    if not exact:
        return
    runs = interpreter_version(interpreter)
    if runs != exact:
        raise UserError(
            f"{prefix} runs Python {runs} ({interpreter}), and the lock was made for Python {exact}",
            f"materialize the lock into a new prefix (lockgen materialize {loaded.source} --prefix DIR): it "
            f"makes the venv with Python {exact}",
        )
