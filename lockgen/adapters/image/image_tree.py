"""An export's image tree on disk and the layers made of it: the lock kept byte for byte under `.lockgen/`, an
existing environment hard-linked into the tree (never changed), the tree's files split by the package that
owns them (a conda package's record and its files, a pip distribution's RECORD and dist-info folder), those
groups built into layers (from the layer cache, on every core), and the finished layout moved to `--out` in
one rename, or archived there.

Which packages share a layer is `core.image.layers.plan_layers`'s rule; which layers a base image already holds is
the team export's (`core.stack.team`); export's use case only wires these together."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from lockgen.adapters.atomic_files import replace_onto
from lockgen.adapters.conda import conda_meta
from lockgen.adapters.distribution import registry
from lockgen.adapters.image import oci_layout
from lockgen.adapters.pypi import dist_info
from lockgen.adapters.store import env_manifest
from lockgen.adapters.image.layer_cache import LayerCache
from lockgen.core.image.layers import plan_layers
from lockgen.core.stack.team import dist_info_key
from lockgen.errors import UserError
from lockgen.model.oci_documents import OciDescriptor
from lockgen.model.oci import LOCK_INSIDE
from lockgen.model.requests import Layering

Meter = Callable[[str, int, int], None]


def keep_lock(tree: Path, data: bytes) -> None:
    """The lock itself, byte for byte (`data`: its bytes as the export read them), under `.lockgen/` (their
    sha256 is the image's lock label): a team stack can `extends` the image and read its base lock from it."""
    (tree / LOCK_INSIDE).parent.mkdir(exist_ok=True)
    (tree / LOCK_INSIDE).unlink(missing_ok=True)  # a tree of hard links (--from-prefix): never write through one
    (tree / LOCK_INSIDE).write_bytes(data)


def link_tree(source: Path, tree: Path) -> None:
    """An existing environment as the image tree: its files hard-linked (copied across file systems), links
    kept as links, its `.lockgen/` left out (hard links of the source's: lockgen writes its own there)."""
    shutil.copytree(source, tree, symlinks=True, copy_function=_link_or_copy)
    shutil.rmtree(tree / ".lockgen", ignore_errors=True)


def _link_or_copy(source: str, destination: str) -> None:
    try:
        os.link(source, destination)
    except OSError:  # another file system: copied
        shutil.copy2(source, destination)


def remove_tree(tree: Path) -> None:
    """A platform's tree, once its image is in the layout (an index's next platform builds its own)."""
    shutil.rmtree(tree)


def _ownership(tree: Path) -> tuple[dict[str, list[str]], list[str]]:
    """Files per package, and the rest: a conda package owns its record's `files` and the record; a pip
    distribution owns what its dist-info `RECORD` lists (not claimed by conda) and its dist-info folder."""
    owned = conda_meta.owned_files(tree)
    claimed = {f for files in owned.values() for f in files}
    rest = [r for r in env_manifest.walk(tree, covered_only=False) if r not in claimed]
    present = set(rest)
    for folder_path in dist_info.dist_info_folders(tree):
        files = {f for f in dist_info.recorded_files(tree, folder_path) if f in present}
        folder = folder_path.relative_to(tree).as_posix() + "/"
        files.update(f for f in present if f.startswith(folder))
        if files:
            owned[f"pypi-{folder_path.name.removesuffix('.dist-info')}"] = sorted(files)
            present -= files
    return owned, [r for r in rest if r in present]


def _manifest_digests(tree: Path) -> dict[str, str]:
    """Content digests the environment manifest already holds (conda-meta records excepted: the manifest
    digests them without their volatile fields)."""
    manifest, _ = env_manifest.read(tree)
    return {
        e["path"]: e["sha256"]
        for e in manifest["files"]
        if e["type"] == "file" and not e["path"].startswith("conda-meta/")
    }


def build_layers(
    tree: Path,
    layout: Path,
    layering: Layering,
    progress: Callable[[str], None],
    prefix: str,
    meter: Meter | None = None,
    held: frozenset[str] = frozenset(),
) -> list[tuple[OciDescriptor, str]]:
    """The layers of the environment in `tree` put into `layout`, (descriptor, diff_id) in plan order: one per
    package (grouped past the budget), the rest last; `held` packages are the base's layers, so only their
    records go into the last layer; `layering` the budget, compression and level."""
    budget, compression, level = layering.budget, layering.compression, layering.level
    owned, rest = _ownership(tree)
    if held:  # the base's layers hold these packages; their records go into the last layer, the team's own
        reused = {
            key
            for key in owned
            if (dist_info_key(key.removeprefix("pypi-")) if key.startswith("pypi-") else key) in held
        }
        rest = sorted(set(rest) | {f for key in reused for f in owned[key] if f.startswith("conda-meta/")})
        owned = {key: files for key, files in owned.items() if key not in reused}
    sizes = {key: sum((tree / f).lstat().st_size for f in files) for key, files in owned.items()}
    plans = plan_layers(sizes, max(2, budget - 1)) if owned else []
    groups = [[f for key in plan.members for f in owned[key]] for plan in plans] + ([rest] if rest else [])
    cache = LayerCache(compression, level)
    known = _manifest_digests(tree)
    # tar, sha256, zlib and zstd release the GIL: layers are built on every core, kept in plan order
    with ThreadPoolExecutor(max_workers=max(1, min(len(groups), os.cpu_count() or 1))) as pool:
        futures = [pool.submit(cache.layer, tree, files, layout, known, prefix) for files in groups]
        for count, _ in enumerate(as_completed(futures), 1):
            if meter is not None:
                meter("build and compress layers", count, len(futures))
        done = [future.result() for future in futures]  # plan order, whatever order they finished in
    progress(f"{len(done)} layers, {sum(hit for _, _, hit in done)} taken from the layer cache")
    return [(descriptor, diff_id) for descriptor, diff_id, _ in done]


def within(path: Path, folder: Path) -> bool:
    """Whether `path` (where it leads, once made) lies in `folder` (where it leads), or is it."""
    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(folder))


def place(layout: Path, work: Path, out: Path, fmt: str, sboms: dict[str, bytes]) -> None:
    """The finished layout moved to `out` (or archived there) in one rename, its SBOMs beside it
    (`NAME` in the folder, `OUT.NAME` beside an archive)."""
    for name, sbom in sboms.items():
        (layout / name).write_bytes(sbom)
    if fmt == "oci-layout":  # the old layout set aside, not removed, until the new one is in its place
        old = work / "replaced"
        if out.exists():
            os.rename(out, old)
        try:
            os.rename(layout, out)
        except OSError:  # the old layout back where it was
            if old.exists():
                os.rename(old, out)
            raise
        shutil.rmtree(old, ignore_errors=True)
        return
    _require_every_blob(layout, fmt)
    archive = work / "archive.tar"
    if fmt == "oci-archive":
        oci_layout.write_archive(layout, archive)
    else:
        registry.to_docker_archive(layout, oci_layout.tag_of(layout), archive)
    replace_onto(archive, out)  # a refusal names `out`, never the work folder's archive
    for name, sbom in sboms.items():
        out.with_name(f"{out.name}.{name}").write_bytes(sbom)


def _require_every_blob(layout: Path, fmt: str) -> None:
    """Refuses to write an archive of a shallow layout: an archive must hold every blob it names."""
    if oci_layout.base_source(layout) is not None:  # only a shallow layout records one
        raise UserError(
            f"a {fmt} holds every blob, and this image's base layers stay in the base's registry "
            f"({oci_layout.base_source(layout)})",
            "export an oci-layout and push it, or export on a local --base LAYOUT for an archive",
        )
