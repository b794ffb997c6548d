"""Steps several use cases share, below them (never a use case itself, importing none): the platform
of a lock to work on, where an environment of a lock lives by default, making one at its final path
(atomic, one run at a time per path: materialize, unpack), and building one: hash-checked
packages linked and installed into a temporary folder, patched for its final path, every file proven
against its package's own manifest (conda: the extracted cache checked against the verified archive's
paths.json before linking; wheels: the installed files against the wheel's RECORD, links to store files
proven before trusted by their fingerprints: `wheel_steps`), and the manifest
written from those proven hashes, so only what was patched or generated is read again."""

from __future__ import annotations

import contextlib
import gc
import stat
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from lockgen.adapters import home, parallel
from lockgen.adapters.conda import conda_meta
from lockgen.adapters.pypi import dist_info
from lockgen.adapters.store import env_manifest, file_guard, installers
from lockgen.adapters.proof import (
    bytecode_proof,
    conformance_store,
    prefix_observer,
    security_xattrs,
    stat_walk,
    store_scrub,
)
from lockgen.api.steps.manifest_steps import manifest_of, placed_wheel
from lockgen.api.steps.wheel_steps import Installed, install_proven
from lockgen.core.env import drift as drift_rules
from lockgen.core.lock import lock_builder
from lockgen.core.stack import stack_layout
from lockgen.core.env.conformance import ExpectedPackage, launcher_targets, unstated
from lockgen.core.env.expected_env import conda_expected, lock_python
from lockgen.core.lock.lock_builder import LockgenMeta
from lockgen.core.stack.team import HeldEnvironment, package_key
from lockgen.core.env.wheel_files import OWN_FOLDER, in_own_folder
from lockgen.errors import LockFormatError, UserError
from lockgen.model.environment_record import EnvironmentManifest, ManifestStats
from lockgen.model.lock import LoadedLock, Lock, LockedPackage

if TYPE_CHECKING:  # loaded by the drift checks alone (the results' dataclasses: about 12 ms a build does without)
    from lockgen.model.results import Drift

Meter = Callable[[str, int, int], None]


def materialize_into(
    loaded: LoadedLock,
    platform: str,
    final: Path,
    progress: Callable[[str], None],
    meter: Meter | None = None,
    allow_md5: bool = False,
    verify: bool = False,
) -> str:
    """Makes the environment of `loaded` for `platform` at the absolute path `final` and returns its digest: built in
    a temporary folder beside it and renamed into place (nothing is left at `final` on failure). An environment of
    this lock already there is checked against its manifest (`verify`: every file hashed) and kept."""
    final.parent.mkdir(parents=True, exist_ok=True)
    with file_guard.held(final.parent / f".{final.name}.lock"):  # two runs of one lock make one environment
        file_guard.sweep_dead_builds(final.parent, final.name)
        if (final / env_manifest.MANIFEST).is_file():
            manifest, _ = env_manifest.read(final)
            if manifest.get("lock_sha256") == loaded.sha256:
                drift = recorded_drift(final, full=verify)
                if not drift.clean:
                    changed = (drift.modified + drift.missing + drift.extra + drift.unsafe)[0]
                    raise UserError(
                        f"{final} holds this lock's environment but changed since it was made "
                        f"({len(drift.modified)} modified, {len(drift.missing)} missing, "
                        f"{len(drift.extra)} extra, {len(drift.unsafe)} with unsafe modes; first {changed})",
                        "remove it and materialize again, or pass another --prefix",
                    )
                progress(f"{final} is already materialized (unchanged since it was made)")
                return str(manifest["environment_digest"])
            raise UserError(f"{final} holds another lock's environment", "choose another --prefix or remove it")
        if final.exists():
            raise UserError(f"{final} exists and is not a lockgen environment", "choose another --prefix")
        if final.is_symlink():  # a link to nothing: the environment is renamed to the path, never made through a link
            raise UserError(
                f"{final} is a symbolic link to `{final.readlink()}`, which leads to nothing",
                "remove the link, or pass --prefix the folder it names",
            )
        with file_guard.built_beside(final) as temp:
            stack_folder = stack_layout.stack_folder_of_lock(Path(loaded.source).absolute()) if loaded.source else None
            digest = build_environment(
                loaded.lock,
                loaded.sha256,
                platform,
                temp,
                final,
                progress,
                meter,
                allow_md5=allow_md5,
                verify=verify,
                stack_folder=stack_folder,
            )
        if loaded.source:  # a damaged store file names the environments that link it
            store_scrub.remember(final, Path(loaded.source), platform)
    return digest


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused while an environment is built: the build makes tens of thousands
    of objects that live until it ends (a torch's proof records, placements, walk and manifest) and next to no
    cycles, so each of the collector's passes over the growing heap is work for nothing (0.15-0.2 s of CPU in a
    build of the CPU torch lock). What cycles there are are collected once it is on again."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


@_collector_paused()
def build_environment(
    lock: Lock,
    lock_digest: str,
    platform: str,
    temp: Path,
    final: Path,
    progress: Callable[[str], None],
    meter: Meter | None = None,
    venv_interpreter: str | None = None,
    held: HeldEnvironment | None = None,
    allow_md5: bool = False,
    verify: bool = False,
    stack_folder: Path | None = None,
) -> str:
    """Builds the environment in `temp`, patched for `final`; returns its digest. A pure-PyPI venv is made
    with this host's Python, then pointed at `venv_interpreter` when given (an image's base Python).
    With `held` (a base image's environment), only the packages it does not hold (and those it says to link
    again) are built: `temp` gets its other records and those packages, the manifest is of the union. On a
    base that is a Python environment (no conda packages), the team's wheels are installed into a scratch
    venv of the same Python, and only their files are kept: the base has its own interpreter and venv files.
    `allow_md5`: conda entries pinned by md5 alone are installed (refused otherwise). `verify`: every installed
    wheel file is hashed, none trusted by its store proof. `stack_folder`: where the lock's local packages are
    (the stack whose locks/ it sits in); without it, a lock with local packages is refused."""
    if not lock.packages_for(platform):
        raise LockFormatError(
            f"the lock holds no package for {platform}: there is no environment to build",
            "re-create it with lockgen resolve (a lock cut short loses its package list)",
        )
    built = [
        p
        for p in lock.packages_for(platform)
        if held is None or package_key(p) not in held.packages or package_key(p) in held.relinked
    ]
    local = [p for p in built if lock_builder.local_of(p) is not None]
    if local and stack_folder is None:
        raise UserError(
            f"the lock's {', '.join(p.name for p in local)} is a local package ({local[0].url}), a folder "
            "relative to the lock's stack, and this lock is not in a stack's locks/ folder",
            "materialize the lock where resolve wrote it (STACK_FOLDER/locks/TARGET.conda-lock.yml)",
        )
    conda, pip = [p for p in built if p.manager == "conda"], [p for p in built if p.manager == "pip" and p not in local]
    if local and stack_folder is not None:
        from lockgen.adapters.pypi import local_source  # a stack's own packages: a lock of published wheels needs none

        local_source.refuse_changed(local, stack_folder)
    unpublished = [p.name for p in pip if lock_builder.is_check_only(p)]
    if unpublished:
        raise UserError(
            f"the lock's {', '.join(unpublished)} is check-only (no published wheel to install)",
            "materialize a lock whose every package has a URL; check-only entries serve check and verify",
        )
    started = time.perf_counter()
    known: dict[str, str] = {}
    expected: list[ExpectedPackage] = []
    installed = _held_records(temp, held) if held else []
    venv: Callable[[Callable[[], object]], None] | None = None  # a pure-PyPI venv, made by install_proven
    if conda:
        known.update(_link_conda(lock, platform, conda, temp, final, progress, meter, installed, allow_md5, expected))
        progress(f"linked {len(conda)} conda packages in {time.perf_counter() - started:.1f}s")
    elif pip or local:
        python = LockgenMeta(lock).python(platform)
        if not python:
            raise UserError(
                "the lock has pip entries but no conda python and no recorded Python version",
                "re-resolve it with lockgen resolve",
            )
        # an image's interpreter, when this host has it at the same path, makes the venv byte for byte the
        # one a bare-metal materialize with that interpreter gives (pyvenv.cfg records its exact version)
        same_here = venv_interpreter is not None and Path(venv_interpreter).exists()
        exact = LockgenMeta(lock).interpreter(
            platform
        )  # a stack's `python = "X.Y.Z"`: that one, found or installed by uv
        interpreter = (
            venv_interpreter
            if venv_interpreter is not None and same_here
            else installers.pinned_python(exact, progress)
            if exact
            else python
        )
        venv = lambda meanwhile: installers.make_venv(temp, interpreter, meanwhile)  # noqa: E731
    walked: env_manifest.Tree | None = None
    extra = {"lock_sha256": lock_digest, "platform": platform, "prefix": str(final)}
    recording: list[parallel.Forked] = []  # the record written by a child while the wheels' proofs are recorded
    children = contextlib.ExitStack()  # a child that is not asked (an error) is ended and waited for as this ends
    if pip:
        python_xy = lock_python(lock, platform) or ""
        ahead = not (conda or local or held or venv_interpreter)  # the tree the wheels leave is the environment

        def record_ahead(installed: Installed) -> None:
            if ahead:
                taken, keep = installed.entries, installed.keep_entries
                record = partial(_recorded, temp, installed.proven, installed.tree, None, extra, taken, keep)
                recording.append(children.enter_context(parallel.Forked(record)))

        with children:
            wheels = install_proven(
                pip,
                lambda: [placed_wheel(package, python_xy, verify) for package in pip],
                temp,
                progress,
                meter,
                verify,
                venv,
                record_ahead,
                python_xy,
                whole=ahead,
            )
            expected.extend(wheels.placed)
            known.update(wheels.proven)
            walked = wheels.tree
            if recording:  # the child's answer is the environment's digest; None where it failed: written here
                vouched = wheels.vouched  # a placement's files whose unstated check was kept with their entries
                rest = {path: walked[0][path] for path in walked[0].keys() - vouched} if vouched else walked[0]
                _nothing_unstated(temp, final, expected, rest)
                done = recording[0].result()
                digest = done or _recorded(temp, known, walked, None, extra, wheels.entries, wheels.keep_entries)
                if wheels.vouch is not None:  # this environment passed: its placement's entries are kept
                    wheels.vouch()
                return digest
    if local and stack_folder is not None:  # after the wheels: the local packages' dependencies are among them
        if venv is not None and not pip:
            venv(lambda: None)
        from lockgen.adapters.pypi import local_source

        local_source.install(local, stack_folder, temp / "bin" / "python", progress)
        expected.extend(local_source.installed_expected(temp, package) for package in local)
        walked = None  # the tree changed: walked again
    walked = walked or env_manifest.scan_tree(temp)  # one walk for the check below and the manifest
    _nothing_unstated(temp, final, expected, walked[0])
    scanned: env_manifest.Tree | None = walked
    if pip and not conda and held is not None:  # on a base that is a Python environment: the wheels alone
        dist_info.keep_only_distributions(temp)
        scanned = None  # the tree changed: the manifest walks it again
    elif pip and not conda and venv_interpreter:
        installers.point_venv_at(temp, venv_interpreter)
        scanned = None
    return _recorded(temp, known, scanned, held, extra)


def _recorded(
    temp: Path,
    known: Mapping[str, str],
    scanned: env_manifest.Tree | None,
    held: HeldEnvironment | None,
    extra: Mapping[str, str],
    taken: env_manifest.Entries | None = None,
    keep: Callable[[env_manifest.Entries], None] | None = None,
) -> str:
    """Writes the environment's record into `temp` (its manifest with `extra`, of the union with `held`'s files on
    a base, and its stats) from the proven sha256 `known` and the walk `scanned` (None: walked here); returns the
    environment's digest. `taken`: the entries of a placement's files, kept (not worked out again); `keep`: given
    every entry made, writes the placement's aside for the next environment (where none were taken: kept once this
    one passed its checks, `Installed.vouch`)."""
    made = env_manifest.built(temp, known, scanned, taken=taken)  # the manifest and its encoding in one pass
    if keep is not None:
        keep(made.entries)
    if held:  # the union's files, encoded again
        manifest, files_json = env_manifest.overlay(held.entries, made.manifest), None
    else:
        manifest, files_json = made.manifest, made.files_json
    return env_manifest.write(temp, manifest, made.stats_json, extra, files_json)


def _held_records(temp: Path, held: HeldEnvironment) -> list[Path]:
    """The base's conda-meta records written into `temp`: the packages it holds that are not linked again."""
    paths = []
    for relative, data in sorted(held.records.items()):
        if Path(relative).stem in held.relinked:
            continue
        path = temp / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        paths.append(path)
    return paths


def _link_conda(
    lock: Lock,
    platform: str,
    conda: list[LockedPackage],
    temp: Path,
    final: Path,
    progress: Callable[[str], None],
    meter: Meter | None,
    installed: list[Path],
    allow_md5: bool,
    expected_out: list[ExpectedPackage],
) -> dict[str, str]:
    """Fetches, checks and links the conda packages; returns the proven sha256 of the files they linked
    (and adds what each package states it links to `expected_out`)."""
    from lockgen.adapters import archive_safety  # the conda side's: a pure-PyPI build loads none of it
    from lockgen.adapters.conda import rattler_cache
    from lockgen.adapters.store import package_store  # with its HTTP client (urllib.request, http.client: 11 ms)
    from lockgen.adapters.store import transfer_progress

    archives, manifests, sizes = [], [], 0
    for index, package in enumerate(conda, 1):
        archive = package_store.fetch(package, allow_md5=allow_md5, progress=progress)
        try:  # the members, then paths.json's paths, links and placeholders: confined to the prefix
            archive_safety.check_archive(archive, f"`{package.name}` {package.version} ({package.url})")
            manifests.append(manifest_of(package, {}, archive)[0])
        except LockFormatError:
            package_store.discard(archive)
            raise
        archives.append(archive)
        sizes += archive.stat().st_size
        if meter is not None:
            meter("fetch and check conda packages", index, len(conda))
        elif index == len(conda):
            progress(f"fetched {index} conda packages (hash-checked, {transfer_progress.amount(sizes)})")
    cache = home.lockgen_home() / "rattler-cache"
    with rattler_cache.held(cache):
        rattler_cache.verify_extracted(cache, list(zip(conda, manifests)), progress, archives)
        installers.install_conda(archives, temp, final, platform, cache, installed)
        rattler_cache.stamp(cache, list(zip(conda, manifests)))
    conda_meta.record_origins(temp, conda)
    python = lock_python(lock, platform)
    known: dict[str, str] = {}
    for manifest in manifests:  # placeholder files are patched on install: hashed again, not assumed
        expected = conda_expected(manifest, python, {})
        expected_out.append(expected)
        known.update({f.path: f.sha256 for f in expected.files if f.sha256 and f.kind == "file"})
    return known


def _nothing_unstated(temp: Path, final: Path, expected: list[ExpectedPackage], walked: env_manifest.Walked) -> None:
    """Refuses an environment just built that holds a file no package states and no rule derives (a wheel
    file its RECORD does not list, rattler's `__clobbers__` copies) or a path two packages install: the
    conformance `check --lock` applies, by path alone (contents were proven as they were installed), on the
    paths of the walk `walked` (the tree's paths but its folders, with their lstat)."""
    planted = sorted(path for path in walked if in_own_folder(path))
    # lockgen writes its record after this: a package's file there (a wheel member its RECORD does not list) would be
    # written through
    if planted:
        raise LockFormatError(
            f"installing left {planted[0]} in {OWN_FOLDER}/, lockgen's record of the environment",
            "a package writes where only lockgen may: refuse it; nothing was kept",
        )
    stated = {f.path for package in expected for f in package.files}
    rest = {path: info for path, info in walked.items() if path not in stated}  # only these can be foreign
    observed = prefix_observer.observe(
        temp, (), read_these=launcher_targets(expected).keys(), walked=rest, privileges=False
    )
    foreign, clobbered = unstated(expected, observed, str(final))
    if clobbered:
        clash = clobbered[0]
        raise LockFormatError(
            f"two packages of the lock install {clash.path} ({', '.join(clash.owners)})",
            "the lock is not one consistent environment: re-resolve it; nothing was kept",
        )
    if foreign:
        raise LockFormatError(
            f"installing left {len(foreign)} files no package states; first {foreign[0]}",
            "a package installs more than its manifest (RECORD, paths.json) lists: refuse it; nothing was kept",
        )


def recorded_drift(prefix: Path, full: bool) -> Drift:
    """A lockgen environment against the manifest it recorded when it was made: missing, extra and modified
    files (content, link target, exec bit or full mode), files and folders no rule accounts for, and modes
    (or file capabilities) no package installs. Only files whose fingerprint (size, mtime, inode, mode; ctime where the
    link count is as it was) moved are re-hashed
    unless `full`; a tree whose stat walk is the one the last clean look saw (`conformance_store`: nothing
    moved, the record included) is clean without reading anything. Both stand only within the stat trust window
    (`conformance_store.byte_trust`): once the last look that read every byte is older, every byte is read again."""
    from lockgen.model.results import Drift

    trust = conformance_store.byte_trust(prefix, "")
    full = full or trust.expired
    tree = stat_walk.tree_fingerprint(prefix)  # before anything is read
    kept = None if full else conformance_store.load_verdict(prefix, "", conformance_store.DRIFT_CONTEXT)
    linked = conformance_store.standing(kept, tree) if kept is not None else None
    if linked == 0 or (linked and not tree.settled):
        return Drift([], [], [], [], _shown(trust.read))
    # else the work: where only link counts moved (another environment sharing the files was made or removed), it
    # reads no file and keeps them anew in the record's fingerprints, then the verdict of the walk after that
    manifest, stats = env_manifest.read(prefix)
    drift = _drift(prefix, full, manifest, stats)
    read = trust.now if full else trust.read
    if not drift.clean:
        conformance_store.drop_verdict(prefix, "", conformance_store.DRIFT_CONTEXT)
    else:
        if full:  # every byte read, and found as recorded: the record's fingerprints stand again for a window
            conformance_store.every_byte_read(prefix, "", trust.now)
        if tree.settled:  # with the record's own fields: a repeated materialize then reads no record (3 MB for a torch)
            conformance_store.save_verdict(
                prefix,
                "",
                conformance_store.DRIFT_CONTEXT,
                tree,
                {key: manifest.get(key) for key in ("lock_sha256", "platform", "environment_digest")},
            )
    return replace(drift, read_every_byte=_shown(read))


def _shown(when: float | None) -> str | None:
    return conformance_store.shown_time(when) if when is not None else None


def _drift(prefix: Path, full: bool, manifest: EnvironmentManifest, stats: ManifestStats) -> Drift:
    """The work of `recorded_drift`: every path against the record (`manifest`, `stats`), hashing what moved
    (all when `full`)."""
    from lockgen.model.results import Drift

    recorded = {e["path"]: e for e in manifest["files"]}
    fingerprints = stats["files"]
    infos, folder_infos = env_manifest.scan_tree(prefix)
    everything, folders = sorted(infos), sorted(folder_infos)
    present = {relative for relative in everything if env_manifest.covered(relative)}
    modified = []
    verified: dict[str, list[int]] = {}
    settled_before = time.time_ns() - stat_walk.RACY_NS
    for relative in sorted(present & recorded.keys()):
        now = env_manifest.fingerprint(infos[relative])
        before = fingerprints.get(relative)
        if not full and env_manifest.unchanged(before, now):
            if (
                before != now and now[2] < settled_before
            ):  # its ctime moved with its link count: kept anew, unread (not racy)
                verified[relative] = now
            continue
        mode_moved = before is not None and len(before) >= 5 and before[4] != now[4]
        if mode_moved or env_manifest.entry_of(prefix, relative) != recorded[relative]:
            modified.append(relative)
        elif before != now and (before is not None or now[2] < settled_before):
            # re-hashed and equal: a hard link's ctime moved, its link count as it was; or no fingerprint was kept
            # (stats an older lockgen wrote, or damaged ones) and it is kept now, where the file is not racy
            verified[relative] = now
    if verified and not modified:
        env_manifest.refresh_fingerprints(prefix, stats, verified)
    unsafe = unsafe_modes(prefix, {**infos, **folder_infos})
    extra = sorted(present - recorded.keys())
    derived = [p for p in everything if p not in present]
    extra += drift_rules.uncovered_extras(derived, set(recorded))
    unproven = bytecode_proof.unproven(prefix, drift_rules.cached_byte_code(derived, set(recorded)))
    extra += [f"{path} ({why})" for path, why in sorted(unproven.items())]
    if stats["dirs"] is not None:
        known = set(stats["dirs"]) | {".lockgen"}
        extra += [f"{d}/" for d in folders if d not in known and not d.endswith("/__pycache__") and d != "__pycache__"]
    return Drift(sorted(recorded.keys() - present), sorted(extra), modified, unsafe)


def unsafe_modes(prefix: Path, walked: env_manifest.Walked | None = None) -> list[str]:
    """`PATH (why)` for each file or folder of `prefix` (`walked`: its paths with their lstat, when the caller
    walked it) whose mode no package installs (`core.env.drift.unsafe_mode`) or that carries file capabilities,
    sorted."""
    if walked is None:
        files, folders = env_manifest.scan_tree(prefix)
        walked = {**files, **folders}
    unsafe = []
    for relative, info in walked.items():
        why = drift_rules.unsafe_mode(relative, info.st_mode, info.st_size)
        if why is None and stat.S_ISREG(info.st_mode):
            why = security_xattrs.privilege_of(f"{prefix}/{relative}", info.st_mode)  # no Path per file
        if why:
            unsafe.append(f"{relative} ({why})")
    return sorted(unsafe)
