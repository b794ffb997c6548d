"""Use case `lockgen export`: a lock becomes an OCI image layout with a reproducible digest, the
environment at a fixed path (`/opt/env`) so its manifest digest is the one a bare-metal materialize at
that path gives.

The environment is built (hash-checked, placeholders patched for the image path) in a temporary
folder; each package becomes one layer (a conda package: its files and its conda-meta record; a pip
distribution: what its RECORD lists), grouped past the layer budget; the rest (the venv's own
files, `.lockgen/`) is the last layer. An existing environment becomes an image too: one on disk
(`FromPrefix`, re-layered) or one in a vendor's image (`FromImage`, its layers kept as they are
and one layer added with the environment's record). Layers come from the layer cache (`adapters.image.layer_cache`), so
exporting again, or the next target, tars and compresses only what is new. `FromLock(index=True)` writes one
image per platform of the lock, under one OCI image index; a foreign platform is built only when it is
all conda (rattler links packages of any platform without running them; wheels need that platform's Python).
A venv runs on a Python outside it, which the image must hold (`interpreter_steps`): an export whose image
could not start its Python is refused, never written.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path

from lockgen.adapters import home
from lockgen.adapters.conda import conda_meta
from lockgen.adapters.atomic_files import WRITABLE_HINT, check_writable
from lockgen.adapters.image import image_source, image_tree, oci_layout
from lockgen.adapters.store import env_manifest, file_guard
from lockgen.adapters.lock.lockfile_yaml import read_lock
from lockgen.api.steps import held_base_steps, base_steps, interpreter_steps
from lockgen.api.steps.conformance_steps import conform, read_bundle
from lockgen.api.steps.materialize_steps import lock_platform
from lockgen.api.steps.shared_steps import Meter, build_environment
from lockgen.core.lock import lock_builder
from lockgen.core.image.image_config import image_config, is_environment_prefix, service_files
from lockgen.core.lock.lock_builder import LockgenMeta
from lockgen.core.image.sbom import cyclonedx
from lockgen.core.stack.team import HeldEnvironment, package_key, team_prefix
from lockgen.digests import canonical_json
from lockgen.errors import UserError
from lockgen.model.environment_record import EnvironmentManifest
from lockgen.model.lock import LoadedLock, Lock
from lockgen.model.requests import ExportRequest, FromImage, FromPrefix, Layering
from lockgen.model.results import Conformance, ExportedImage, ExportedIndex
from lockgen.model.oci_documents import OciDescriptor, OciIndex, OciManifest
from lockgen.model.oci import (
    ARCHITECTURE,
    BASE_CONFIG_INSIDE,
    BASE_MANIFEST_INSIDE,
    COMPRESSION_LEVELS,
    CONFIG_MEDIA_TYPE,
    FORMATS,
    IMAGE_PREFIX,
    INDEX_MEDIA_TYPE,
    MANIFEST_MEDIA_TYPE,
    PREFIX_LABEL,
)


@dataclass(frozen=True)
class BuiltTree:
    """An environment ready to be an image: the lock and platform it is of (the lock's sha256, the environment
    digest), the folder holding it, installed for `prefix`, and the packages the base image's layers hold."""

    lock: Lock
    platform: str
    lock_digest: str
    env_digest: str
    tree: Path
    prefix: str
    held: frozenset[str] = frozenset()


def export(
    request: ExportRequest, progress: Callable[[str], None], meter: Meter | None = None
) -> ExportedImage | ExportedIndex:
    """Writes the image the request asks, atomically, to its `out`: from the lock (one platform, or an index
    of several), from an existing prefix, or from a vendor's image. The lock is read once, here: every step
    takes its entries, bytes and sha256 (the image's label, its carried copy, the conformance it is checked by)."""
    _checked_compression(request.layering)
    check_writable(request.out, f"--out {request.out}", WRITABLE_HINT)  # before anything is fetched or built
    source, loaded = request.source, read_lock(request.lock)
    lock_builder.refuse_local(loaded.lock.package, "exported in an image")  # before a base is read or anything is built
    if isinstance(source, FromPrefix):
        return _export_prefix(request, loaded, source, progress, meter)
    if isinstance(source, FromImage):
        return _export_from_image(request, loaded, source, progress, meter)
    if source.index:
        return _export_index(request, loaded, source.platforms, progress, meter)
    return _export_lock(request, loaded, source.platforms[0] if source.platforms else None, progress, meter)


def _checked_compression(layering: Layering) -> None:
    compression, level = layering.compression, layering.level
    if compression not in COMPRESSION_LEVELS:
        raise UserError(f"unknown compression `{compression}`", f"compressions: {', '.join(COMPRESSION_LEVELS)}")
    levels = COMPRESSION_LEVELS[compression]
    if level not in levels:
        raise UserError(f"{compression} has no level {level}", f"pass --compression-level {levels[0]} to {levels[-1]}")


def _work_folder(out: Path, fmt: str) -> AbstractContextManager[Path]:
    """A temporary folder beside `out` (checked first) where the image is made before it is moved there: held
    while this export runs, and removed after it; the folders of exports that were killed are swept first."""
    _checked_out(out, fmt)
    return file_guard.temporary_folder(out.parent, ".lockgen-export-")


def _checked_out(out: Path, fmt: str) -> None:
    if fmt not in FORMATS:
        raise UserError(f"unknown format `{fmt}`", f"formats: {', '.join(FORMATS)}")
    if out.is_symlink():  # replacing it would replace the link, or remove what it leads to
        raise UserError(f"`{out}` is a symbolic link", "pass the path it leads to, or a new path, to --out")
    if fmt == "oci-layout" and out.exists() and not (out / "oci-layout").is_file():
        raise UserError(f"`{out}` exists and is not an OCI layout", "choose an empty or new --out folder")
    if fmt != "oci-layout" and out.is_dir():
        raise UserError(f"`{out}` is a folder; {fmt} writes one file", "pass a file path to --out")
    out.parent.mkdir(parents=True, exist_ok=True)


def _export_lock(
    request: ExportRequest,
    loaded: LoadedLock,
    platform: str | None,
    progress: Callable[[str], None],
    meter: Meter | None,
) -> ExportedImage:
    """The lock's environment built and written as one image. With a base (an OCI layout of one image, or a
    registry's) its layers come first and its config is kept, pinned by digest in the manifest's annotations."""
    lock_path, base, lock, lock_digest = request.lock, request.base, loaded.lock, loaded.sha256
    chosen = lock_platform(lock, platform)
    _buildable_here(lock, chosen)
    with _work_folder(request.out, request.fmt) as work:
        tree = work / "tree"
        read = base_steps.base_manifest(base, chosen, progress) if base is not None else None
        prefix = team_prefix(lock, read[1], IMAGE_PREFIX) if read is not None else IMAGE_PREFIX
        held, on_base = _on_base(lock, lock_path, chosen, base, prefix, progress, read=read)
        interpreter = None
        if on_base is not None and base is not None:  # a team's wheels on a base Python environment run on its Python
            interpreter_steps.prove_held_python(base, chosen, on_base.entries, prefix, progress)
        elif _pure_pypi(lock, chosen):
            interpreter = interpreter_steps.venv_python(base, chosen, LockgenMeta(lock).python(chosen), progress)
        env_digest = build_environment(
            lock, lock_digest, chosen, tree, Path(prefix), progress, meter, venv_interpreter=interpreter, held=on_base
        )
        interpreter_steps.prove_python_starts(base, chosen, tree, prefix, _glibc(lock), progress)
        _drop_build_host_traces(tree)
        image_tree.keep_lock(tree, loaded.data)
        digest = _write_image(
            BuiltTree(lock, chosen, lock_digest, env_digest, tree, prefix, held), work, request, progress, meter
        )
    return ExportedImage(digest, env_digest)


def _export_index(
    request: ExportRequest,
    loaded: LoadedLock,
    platforms: Sequence[str],
    progress: Callable[[str], None],
    meter: Meter | None,
) -> ExportedIndex:
    """The lock's environment of each of `platforms` (every platform it locks when empty) as one image each,
    under one tag naming an OCI image index of them, each with its platform (`linux`, `amd64`/`arm64`).
    Layers two platforms share (noarch packages) are stored once."""
    out, fmt, lock, lock_digest = request.out, request.fmt, loaded.lock, loaded.sha256
    if fmt == "docker-archive":
        raise UserError(
            "a docker-archive holds one image, not an index of several platforms",
            "pass --format oci-layout or oci-archive, or export one --platform",
        )
    chosen = list(platforms) or list(lock.metadata.platforms)
    if len(set(chosen)) != len(chosen):
        raise UserError(f"a platform is named twice in {', '.join(chosen)}", "name each platform once")
    for platform in chosen:
        lock_platform(lock, platform)  # one the lock has
        _buildable_here(lock, platform)
    for platform in chosen:
        if _pure_pypi(lock, platform):
            raise UserError(
                f"the lock's {platform} environment is a venv (PyPI packages only), which runs on a base image's "
                "Python, and an image index takes no --base",
                f"export one --platform {platform} with --base IMAGE that has its Python, or give the stack a "
                "conda python",
            )
    with _work_folder(out, fmt) as work:
        layout = work / "layout"
        images: list[OciDescriptor] = []
        env_digests, sboms = {}, {}
        for platform in chosen:
            progress(f"{platform}: building the environment")
            tree = work / f"tree-{platform}"
            env_digest = build_environment(lock, lock_digest, platform, tree, Path(IMAGE_PREFIX), progress, meter)
            interpreter_steps.prove_python_starts(
                None, platform, tree, IMAGE_PREFIX, _glibc(lock), progress, index=True
            )
            _drop_build_host_traces(tree)
            image_tree.keep_lock(tree, loaded.data)
            manifest, sboms[f"sbom.{platform}.cdx.json"] = _image(
                BuiltTree(lock, platform, lock_digest, env_digest, tree, IMAGE_PREFIX),
                layout,
                request.layering,
                None,
                progress,
                meter,
            )
            images.append(
                {
                    "mediaType": MANIFEST_MEDIA_TYPE,
                    **oci_layout.put_blob(layout, canonical_json(manifest)),
                    "platform": {"architecture": ARCHITECTURE[platform], "os": "linux"},
                }
            )
            env_digests[platform] = env_digest
            image_tree.remove_tree(tree)
        index: OciIndex = {"schemaVersion": 2, "mediaType": INDEX_MEDIA_TYPE, "manifests": images}
        digest = oci_layout.write_index(layout, index, request.tag or LockgenMeta(lock).target or "env")
        image_tree.place(layout, work, out, fmt, sboms)
    return ExportedIndex(digest, env_digests)


def _on_base(
    lock: Lock,
    lock_path: Path,
    platform: str,
    base: base_steps.Base | None,
    prefix: str,
    progress: Callable[[str], None],
    build_on: bool = True,
    read: base_steps.BaseRead | None = None,
) -> tuple[frozenset[str], HeldEnvironment | None]:
    """The packages the base image holds (their layers are reused) and, when `build_on`, the base environment
    to build on instead of building those again. `read`: the base's manifest and config, when already read."""
    if base is None:
        return frozenset(), None
    manifest, config, _ = read or base_steps.base_manifest(base, platform, progress)
    base_lock, held = held_base_steps.held_packages(lock, lock_path, platform, config, prefix, progress)
    if base_lock is None or not build_on:
        return held, None
    if not isinstance(base, Path):
        progress(
            f"reading the held records from the base's {len(manifest['layers'])} layers in its registry, each "
            "only as far as its record"
        )
    return held, held_base_steps.held_environment(
        lock, base_lock, held, platform, base_steps.layer_opener(base), manifest, config, prefix, progress
    )


def _buildable_here(lock: Lock, platform: str) -> None:
    """Refuses a foreign platform's pip packages: conda packages of any platform are linked without running
    anything of theirs, but wheels are installed by the environment's own Python, which cannot run here."""
    native = home.native_platform()
    if platform != native and any(p.manager == "pip" for p in lock.packages_for(platform)):
        raise UserError(
            f"the lock's {platform} environment has PyPI packages, which only a {platform} host can install",
            f"export {platform} on a {platform} host, or pass --platform {native or 'of this host'}",
        )


def _export_prefix(
    request: ExportRequest, loaded: LoadedLock, origin: FromPrefix, progress: Callable[[str], None], meter: Meter | None
) -> ExportedImage:
    """An existing environment (a venv uv or pip made, a node's prefix) as an image, at its own path unless
    `image_prefix` says otherwise; refused unless it conforms to the lock (every file from the lock's
    packages, checked against their own hashes). The source is hard-linked, never changed."""
    lock_path, source, base, manifests = request.lock, origin.path, request.base, origin.manifests
    prefix = _checked_prefix(origin.image_prefix or posixpath.abspath(source))  # `..` resolved as the shell would
    if not source.is_dir():
        raise UserError(
            f"there is no environment folder at {source} to export", "pass --from-prefix DIR, an environment's folder"
        )
    if image_tree.within(request.out, source):  # the image would be made, and copied, inside what it copies
        raise UserError(
            f"--out {request.out} is inside the environment being exported ({source})",
            "write the image outside the environment's folder",
        )
    lock = loaded.lock
    with _work_folder(request.out, request.fmt) as work:
        tree = work / "tree"
        progress(f"linking {source} into the image tree")
        image_tree.link_tree(source, tree)
        # checked after the links are made (they move every inode's ctime), so the manifest below takes the
        # sha256 of each file the check read while its inode is untouched since: the tree is hashed once
        # proven as it will be in the image, at `prefix`: files a package patches with its path (conda's prefix
        # placeholders, launchers) must name that one; the image gets this lock as its own
        conformance = conform(
            loaded,
            source,
            None,
            read_bundle(manifests),
            progress,
            meter,
            prefix,
            allow_foreign=origin.allow_foreign,
            carried_lock=False,
        )
        if not conformance.clean:
            first = conformance.lines()[0]
            moved = prefix != posixpath.abspath(source)
            raise UserError(
                f"{source} is not the environment of {lock_path}" + (f" at {prefix}" if moved else "") + f": {first}",
                "files an install patches name the path it was installed at: drop --image-prefix, or "
                f"materialize the lock at {prefix} and export that"
                if moved
                else f"see lockgen check --lock {lock_path} --prefix {source}; export only an environment that "
                "conforms",
            )
        interpreter_steps.prove_existing_venv(
            base, conformance.platform, source, prefix, posixpath.abspath(source), progress
        )
        interpreter_steps.prove_python_starts(base, conformance.platform, source, prefix, _glibc(lock), progress)
        manifest = env_manifest.build(tree, hashed=conformance.hashes)[0]
        env_digest = _record_existing(tree, manifest, conformance, prefix, loaded)
        held, _ = _on_base(lock, lock_path, conformance.platform, base, prefix, progress, build_on=False)
        built = BuiltTree(lock, conformance.platform, conformance.lock_sha256, env_digest, tree, prefix, held)
        digest = _write_image(built, work, request, progress, meter)
    return ExportedImage(digest, env_digest)


def _export_from_image(
    request: ExportRequest, loaded: LoadedLock, origin: FromImage, progress: Callable[[str], None], meter: Meter | None
) -> ExportedImage:
    """A vendor's image whose environment (at `image_prefix`, else its prefix label, else /opt/env) is the
    lock's, as lockgen's image of that lock: the vendor's layers unchanged (a registry's referenced by digest),
    plus one layer with the environment's record under `.lockgen/`, and labels binding it to the lock. Refused
    unless the environment conforms to the lock (every file from its packages, checked against their own
    hashes); the image is unpacked to check it, never changed."""
    lock_path, source, vendor, manifests = request.lock, origin.source, request.base, origin.manifests
    assert vendor is not None  # the CLI reads --from-image as the base too
    lock = loaded.lock
    with _work_folder(request.out, request.fmt) as work:
        with image_source.opened(source, progress, origin.insecure) as opened:
            prefix = _checked_prefix(
                origin.image_prefix
                or (opened.config.get("config", {}).get("Labels") or {}).get(PREFIX_LABEL)
                or IMAGE_PREFIX
            )
            inside = image_source.environment_in(opened.root, prefix)
            conformance = conform(
                loaded,
                inside,
                None,
                read_bundle(manifests),
                progress,
                meter,
                prefix,
                origin.allow_foreign,
                carried_lock=False,
            )  # the new image carries this lock instead
            if not conformance.clean:
                raise UserError(
                    f"the environment at {prefix} in {source} is not {lock_path}: {conformance.lines()[0]}",
                    f"see lockgen check --lock {lock_path} --image {source} --image-prefix {prefix}",
                )
            interpreter_steps.prove_in_layers(opened.layers, inside, prefix, conformance.platform, progress)
            manifest, _ = env_manifest.build(inside, hashed=conformance.hashes)  # what the check read, not again
            layers_checked = opened.config.get("rootfs", {}).get("diff_ids")
        # the layers the new image names must be the ones just checked (a tag that moved, an index read for
        # another platform): their uncompressed digests, which no manifest conversion changes
        if (
            base_steps.base_manifest(vendor, conformance.platform, progress).config.get("rootfs", {}).get("diff_ids")
            != layers_checked
        ):
            raise UserError(
                f"{source} is not the image just checked (a tag that moved, or an index of other platforms)",
                "name the image by its digest (docker://HOST/REPO@sha256:…) or as a local layout",
            )
        tree = work / "tree"
        tree.mkdir(parents=True)
        env_digest = _record_existing(tree, manifest, conformance, prefix, loaded)
        held = frozenset(package_key(p) for p in lock.packages_for(conformance.platform))  # all in the vendor's layers
        built = BuiltTree(lock, conformance.platform, conformance.lock_sha256, env_digest, tree, prefix, held)
        layering = replace(request.layering, budget=1)  # one layer: the record; the rest are the vendor's
        digest = _write_image(built, work, replace(request, layering=layering), progress, meter)
    return ExportedImage(digest, env_digest)


def _record_existing(
    tree: Path, manifest: EnvironmentManifest, conformance: Conformance, prefix: str, loaded: LoadedLock
) -> str:
    """An existing environment's record in `tree/.lockgen/` (its manifest, bound to the lock it conforms to and
    the conformance digest, and the lock itself); returns the environment digest."""
    env_digest = env_manifest.write(
        tree,
        manifest,
        None,
        {
            "lock_sha256": conformance.lock_sha256,
            "platform": conformance.platform,
            "prefix": prefix,
            "conformance_digest": conformance.expected_digest,
        },
    )
    image_tree.keep_lock(tree, loaded.data)
    return env_digest


def _checked_prefix(prefix: str) -> str:
    """The environment's path in the image, refused unless a plain absolute folder path (its label, shebangs
    and patched placeholders carry it as it is)."""
    if not is_environment_prefix(prefix):
        raise UserError(
            f"`{prefix[:120]}` cannot be the environment's path in the image",
            "pass --image-prefix with an absolute path of letters, digits and ._+@- (e.g. /opt/env)",
        )
    return prefix


def _write_image(
    built: BuiltTree, work: Path, request: ExportRequest, progress: Callable[[str], None], meter: Meter | None = None
) -> str:
    """The image of the built environment, on the request's base, written to its `out` (in its format, under
    its tag); the manifest digest."""
    layout, base = work / "layout", request.base
    manifest, sbom = _image(built, layout, request.layering, base, progress, meter)
    tag = request.tag or f"{LockgenMeta(built.lock).target or 'env'}-{built.platform}"
    digest = oci_layout.write_index(layout, manifest, tag, base_steps.index_annotations(base, manifest))
    image_tree.place(layout, work, request.out, request.fmt, {"sbom.cdx.json": sbom})
    return digest


def _image(
    built: BuiltTree,
    layout: Path,
    layering: Layering,
    base: base_steps.Base | None,
    progress: Callable[[str], None],
    meter: Meter | None,
) -> tuple[OciManifest, bytes]:
    """Layers and config of the built environment put into `layout`: (the image manifest, its SBOM)."""
    lock, chosen, lock_digest, env_digest, tree = (
        built.lock,
        built.platform,
        built.lock_digest,
        built.env_digest,
        built.tree,
    )
    sbom = canonical_json(cyclonedx(lock, chosen, lock_digest, env_digest))
    (tree / ".lockgen").mkdir(exist_ok=True)
    (tree / ".lockgen" / "sbom.cdx.json").write_bytes(sbom)
    _write_services(lock, tree)
    on = base_steps.base_image(base, layout, chosen, progress) if base else None
    base_layers, base_config, annotations = (on.layers, on.config, on.annotations) if on else ([], None, {})
    if base is not None:  # the base's manifest and config, by which a check tells the base's layers and settings
        for inside, data in zip(
            (BASE_MANIFEST_INSIDE, BASE_CONFIG_INSIDE), base_steps.base_documents(base, chosen, progress)
        ):
            (tree / inside).write_bytes(data)
    layers = base_layers + image_tree.build_layers(tree, layout, layering, progress, built.prefix, meter, built.held)
    config = image_config(
        lock, chosen, lock_digest, env_digest, [diff for _, diff in layers], base_config, built.prefix
    )
    manifest: OciManifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "config": {"mediaType": CONFIG_MEDIA_TYPE, **oci_layout.put_blob(layout, canonical_json(config))},
        "layers": [descriptor for descriptor, _ in layers],
    }
    if annotations:
        manifest["annotations"] = annotations
    return manifest, sbom


def _write_services(lock: Lock, tree: Path) -> None:
    """For `[image] services`: lockgen's service launcher and the services it starts, under `.lockgen/` (which
    the environment digest leaves out), run by the environment's own `bin/python`, which must be there."""
    files = service_files(lock)
    recorded = {entry["path"] for entry in env_manifest.read(tree)[0]["files"]} if files else set()
    if files and "bin/python" not in recorded:  # the union's, on a base: the team's tree may hold only its wheels
        raise UserError(
            "[image] services are started by lockgen's launcher on the environment's Python, and this "
            "environment has no bin/python",
            "add python to the stack's dependencies, or state one entrypoint instead of services",
        )
    for path, data in files.items():
        (tree / path).write_bytes(data)


def _glibc(lock: Lock) -> str:
    """The glibc the lock's target states (`lockgen.glibc`), or ""."""
    return LockgenMeta(lock).target_facts.get("glibc", "")


def _pure_pypi(lock: Lock, platform: str) -> bool:
    """Whether the platform's environment is a venv: PyPI packages only, no Python of its own."""
    packages = lock.packages_for(platform)
    return bool(packages) and all(p.manager == "pip" for p in packages)


def _drop_build_host_traces(tree: Path) -> None:
    """Removes what names the machine that built the image: conda-meta's local store paths and link
    sources (the manifest digest never covered them) and the size/mtime cache of `lockgen check`."""
    conda_meta.drop_build_host_fields(tree)
    (tree / env_manifest.STATS).unlink(missing_ok=True)
