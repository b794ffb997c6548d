"""Use case export: a lock becomes an OCI image layout with a reproducible digest, the environment at a
fixed path (`/opt/env`) so its manifest digest is the one a bare-metal materialize at that path gives.

The environment is built (hash-checked, placeholders patched for the image path) in a temporary
folder; each package becomes one layer (a conda package: its files and its conda-meta record; a pip
distribution: what its RECORD lists), grouped past the layer budget; the rest (the venv's own
files, `.lockgen/`) is the last layer.
Layers are cached under `$LOCKGEN_HOME/layers` by content key (`oci_layout.layer_key`), their blobs
by digest and hard-linked into layouts: exporting again, or the next target, tars and compresses
only what is new.
"""

from __future__ import annotations

import csv
import io
import json
import os
import posixpath
import shutil
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from lockgen.adapters import env_manifest, image_source, oci_layout, package_store, registry
from lockgen.adapters.image_source import IMAGE_PREFIX, LOCK_LABEL, ENVIRONMENT_LABEL
from lockgen.adapters.file_digest import file_digest
from lockgen.adapters.lockfile_yaml import load_lock
from lockgen.api_materialize import build_environment, check, choose_platform, manifest_drift
from lockgen.core.layers import plan_layers
from lockgen.core.sbom import cyclonedx
from lockgen.errors import UserError

FORMATS = ("oci-layout", "oci-archive", "docker-archive")
ARCHITECTURE = {"linux-64": "amd64", "linux-aarch64": "arm64"}


def export(lock_path: Path, platform: str | None, out: Path, tag: str | None, layer_budget: int,
           level: int, progress: Callable[[str], None], base: Path | None = None,
           fmt: str = "oci-layout") -> tuple[str, str]:
    """Writes the layout to `out` (atomically) and returns (manifest digest, environment digest).
    With `base` (an OCI layout of one image) its layers come first and its config is kept, pinned by
    digest in the manifest's annotations."""
    lock = load_lock(lock_path)
    chosen = choose_platform(lock.metadata.platforms, platform)
    lock_digest = file_digest(lock_path)
    if fmt not in FORMATS:
        raise UserError(f"unknown format `{fmt}`", f"formats: {', '.join(FORMATS)}")
    if fmt == "oci-layout" and out.exists() and not (out / "oci-layout").is_file():
        raise UserError(f"`{out}` exists and is not an OCI layout", "choose an empty or new --out folder")
    if fmt != "oci-layout" and out.is_dir():
        raise UserError(f"`{out}` is a folder; {fmt} writes one file", "pass a file path to --out")
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".lockgen-export-", dir=out.parent))
    try:
        tree = work / "tree"
        pure_pypi = all(p.manager == "pip" for p in lock.packages_for(chosen))
        interpreter = _base_python(base, lock.meta(f"python.{chosen}"), progress) if pure_pypi else None
        env_digest = build_environment(lock, lock_digest, chosen, tree, Path(IMAGE_PREFIX), progress,
                                       venv_interpreter=interpreter)
        _drop_build_host_traces(tree)
        sbom = oci_layout.canonical_json(cyclonedx(lock, chosen, lock_digest, env_digest))
        (tree / ".lockgen" / "sbom.cdx.json").write_bytes(sbom)
        layout = work / "layout"
        base_layers, base_config, annotations = _base(base, layout, chosen) if base else ([], None, {})
        layers = base_layers + _layers(tree, layout, layer_budget, level, progress)
        config = _config(lock, chosen, lock_digest, env_digest, [diff for _, diff in layers], base_config)
        manifest = {"schemaVersion": 2, "mediaType": oci_layout.MANIFEST_MEDIA_TYPE,
                    "config": {"mediaType": oci_layout.CONFIG_MEDIA_TYPE, **oci_layout.put_blob(layout, oci_layout.canonical_json(config))},
                    "layers": [descriptor for descriptor, _ in layers]}
        if annotations:
            manifest["annotations"] = annotations
        digest = oci_layout.write_index(layout, manifest, tag or f"{lock.meta('target') or 'env'}-{chosen}")
        (layout / "sbom.cdx.json").write_bytes(sbom)
        if fmt == "oci-layout":
            if out.exists():
                shutil.rmtree(out)
            os.rename(layout, out)
        else:
            archive = work / "archive.tar"
            if fmt == "oci-archive":
                oci_layout.write_archive(layout, archive)
            else:
                registry.to_docker_archive(layout, oci_layout.tag_of(layout), archive)
            os.replace(archive, out)
            out.with_name(out.name + ".sbom.cdx.json").write_bytes(sbom)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return digest, env_digest


def _base_python(base: Path | None, version: str | None, progress: Callable[[str], None]) -> str:
    """Where a pure-PyPI image's venv finds Python: the base's `pythonX.Y` (Debian's /usr/bin, or
    /usr/local/bin of the python:X.Y images), else /usr/bin/pythonX.Y, which the image then lacks:
    said in a note, since a later layer or runtime may still bring it."""
    name = f"python{'.'.join((version or '3').split('.')[:2])}"
    if base is not None:
        paths = oci_layout.layer_paths(base)
        for folder in ("usr/local/bin", "usr/bin"):
            if f"{folder}/{name}" in paths:
                return f"/{folder}/{name}"
    where = "the base image has no" if base is not None else "no base image brings"
    progress(f"note: the venv runs on /usr/bin/{name}, and {where} {name}: "
             f"pass --base with Python {name.removeprefix('python')} for an image that runs on its own")
    return f"/usr/bin/{name}"


def _drop_build_host_traces(tree: Path) -> None:
    """Removes what names the machine that built the image: conda-meta's local store paths and link
    sources (the manifest digest never covered them) and the size/mtime cache of `lockgen check`."""
    for record_path in (tree / "conda-meta").glob("*.json"):
        record = json.loads(record_path.read_text())
        for key in env_manifest.BUILD_HOST_META:
            record.pop(key, None)
        record_path.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    (tree / env_manifest.STATS).unlink(missing_ok=True)


def _ownership(tree: Path) -> tuple[dict[str, list[str]], list[str]]:
    """Files per package, and the rest: a conda package owns its record's `files` and the record; a pip
    distribution owns what its dist-info `RECORD` lists (not claimed by conda) and its dist-info folder."""
    owned: dict[str, list[str]] = {}
    claimed: set[str] = set()
    for record_path in sorted((tree / "conda-meta").glob("*.json")):
        record = json.loads(record_path.read_text())
        files = [f for f in record.get("files", []) if (tree / f).exists() or (tree / f).is_symlink()]
        files.append(f"conda-meta/{record_path.name}")
        owned[record_path.stem] = sorted(set(files))
        claimed.update(files)
    rest = [r for r in env_manifest.walk(tree, covered_only=False) if r not in claimed]
    present = set(rest)
    for dist_info in sorted(tree.glob("lib/python*/site-packages/*.dist-info")):
        files = {f for f in _record_files(tree, dist_info) if f in present}
        folder = dist_info.relative_to(tree).as_posix() + "/"
        files.update(f for f in present if f.startswith(folder))
        if files:
            owned[f"pypi-{dist_info.name.removesuffix('.dist-info')}"] = sorted(files)
            present -= files
    return owned, [r for r in rest if r in present]


def _record_files(tree: Path, dist_info: Path) -> list[str]:
    """The tree-relative paths a wheel's RECORD lists (relative to site-packages, `../../../bin/x` too)."""
    try:
        rows = csv.reader(io.StringIO((dist_info / "RECORD").read_text(encoding="utf-8")))
    except OSError:
        return []
    site = dist_info.parent.relative_to(tree).as_posix()
    return [posixpath.normpath(posixpath.join(site, row[0])) for row in rows if row and row[0]]


def _manifest_digests(tree: Path) -> dict[str, str]:
    """Content digests the environment manifest already holds (conda-meta records excepted: the manifest
    digests them without their volatile fields)."""
    manifest = json.loads((tree / env_manifest.MANIFEST).read_text())
    return {e["path"]: e["sha256"] for e in manifest["files"]
            if e["type"] == "file" and not e["path"].startswith("conda-meta/")}


def _cached(layout: Path, cache: Path, digest: str, verify: bool = True) -> dict[str, Any] | None:
    """The cached blob of `digest` put into the layout; None when it is gone or its bytes changed."""
    blob = cache / f"blob-{digest.split(':', 1)[1]}"
    if not blob.is_file():
        return None
    descriptor = oci_layout.link_cached_blob(layout, blob, digest, verify)
    if descriptor is None:
        blob.unlink(missing_ok=True)
    return descriptor


def _write_entry(path: Path, value: dict[str, str]) -> None:
    partial = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.partial")
    partial.write_text(json.dumps(value))
    os.replace(partial, path)


def _layers(tree: Path, layout: Path, budget: int, level: int, progress: Callable[[str], None]) -> list[tuple[dict[str, Any], str]]:
    owned, rest = _ownership(tree)
    sizes = {key: sum((tree / f).lstat().st_size for f in files) for key, files in owned.items()}
    plans = plan_layers(sizes, max(2, budget - 1)) if owned else []
    groups = [[f for key in plan.members for f in owned[key]] for plan in plans] + ([rest] if rest else [])
    cache = package_store.lockgen_home() / "layers"
    cache.mkdir(parents=True, exist_ok=True)
    known = _manifest_digests(tree)

    def one_layer(files: list[str]) -> tuple[dict[str, Any], str, bool]:
        entry = cache / f"{oci_layout.layer_key(tree, files, IMAGE_PREFIX, known)}-gz{level}.json"
        if entry.is_file():  # same files, same bytes: the tar need not be written again
            recorded = json.loads(entry.read_text())
            descriptor = _cached(layout, cache, recorded["digest"])
            if descriptor is not None:
                return {"mediaType": oci_layout.LAYER_MEDIA_TYPE, **descriptor}, recorded["diff_id"], True
        with tempfile.NamedTemporaryFile(dir=cache, suffix=".tar", delete=False) as handle:
            tar_path = Path(handle.name)
        try:
            diff_id = oci_layout.write_layer_tar(tree, sorted(files), IMAGE_PREFIX, tar_path)
            by_diff_id = cache / f"{diff_id.split(':', 1)[1]}-gz{level}.json"
            descriptor = _cached(layout, cache, json.loads(by_diff_id.read_text())["digest"]) if by_diff_id.is_file() else None
            hit = descriptor is not None
            if not hit:
                partial = cache / f"compressing.{os.getpid()}.{threading.get_ident()}.partial"
                oci_layout.compress(tar_path, partial, level)
                digest = "sha256:" + file_digest(partial)
                os.replace(partial, cache / f"blob-{digest.split(':', 1)[1]}")
                descriptor = _cached(layout, cache, digest, verify=False)
                _write_entry(by_diff_id, {"digest": digest})
            _write_entry(entry, {"diff_id": diff_id, "digest": descriptor["digest"]})
            return {"mediaType": oci_layout.LAYER_MEDIA_TYPE, **descriptor}, diff_id, hit
        finally:
            tar_path.unlink(missing_ok=True)

    # tar, sha256 and zlib release the GIL: layers are built on every core, kept in plan order
    with ThreadPoolExecutor(max_workers=max(1, min(len(groups), os.cpu_count() or 1))) as pool:
        done = list(pool.map(one_layer, groups))
    progress(f"{len(done)} layers, {sum(hit for _, _, hit in done)} taken from the layer cache")
    return [(descriptor, diff_id) for descriptor, diff_id, _ in done]


def _base(base: Path, layout: Path, platform: str) -> tuple[list[tuple[dict[str, Any], str]], dict[str, Any], dict[str, str]]:
    """The base image's layers (blobs copied), its config, and the annotations that pin it."""
    manifest, config, digest = oci_layout.read_image(base)
    if config.get("architecture") != ARCHITECTURE[platform]:
        raise UserError(f"the base image is for {config.get('architecture')}, the lock's platform is {platform}",
                        "pass a base image of the lock's architecture")
    layers = []
    for descriptor, diff_id in zip(manifest["layers"], config["rootfs"]["diff_ids"]):
        source = base / "blobs" / "sha256" / descriptor["digest"].split(":", 1)[1]
        layers.append(({**descriptor, **oci_layout.put_blob_file(layout, source)}, diff_id))
    return layers, config, {"org.opencontainers.image.base.digest": digest,
                            "org.opencontainers.image.base.name": oci_layout.tag_of(base)}


def _config(lock: Any, platform: str, lock_digest: str, env_digest: str, diff_ids: list[str],
            base: dict[str, Any] | None = None) -> dict[str, Any]:
    packages = {p.name: p for p in lock.packages_for(platform)}
    env = [f"PATH={IMAGE_PREFIX}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
           f"CONDA_PREFIX={IMAGE_PREFIX}"]
    cuda = packages.get("cuda-version") or packages.get("nvidia-cuda-runtime") or packages.get("nvidia-cuda-runtime-cu12")
    if lock.meta("arch") not in ("", "cpu") and cuda is not None:
        major_minor = ".".join(cuda.version.split(".")[:2])
        env += ["NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=compute,utility",
                f"NVIDIA_REQUIRE_CUDA=cuda>={major_minor}"]
    labels = {
        "org.opencontainers.image.title": f"{lock.meta('stack') or 'lockgen'} {lock.meta('target')}".strip(),
        "org.opencontainers.image.description": "made by lockgen export from a lock",
        LOCK_LABEL: lock_digest,
        ENVIRONMENT_LABEL: f"sha256:{env_digest}",
        "dev.lockgen.target": lock.meta("target"),
        "dev.lockgen.arch": lock.meta("arch"),
        "dev.lockgen.prefix": IMAGE_PREFIX,
    }
    inherited = (base or {}).get("config", {})
    for line in inherited.get("Env", []):
        key = line.split("=", 1)[0]
        if key == "PATH":
            env[0] = f"PATH={IMAGE_PREFIX}/bin:{line.split('=', 1)[1]}"
        elif not any(e.startswith(key + "=") for e in env):
            env.append(line)
    return {"created": "1970-01-01T00:00:00Z", "architecture": ARCHITECTURE[platform], "os": "linux",
            "config": {**{k: v for k, v in inherited.items() if k not in ("Env", "Labels", "User")},
                       "User": "1000:1000", "Env": env, "WorkingDir": inherited.get("WorkingDir", "/"),
                       "Labels": {**inherited.get("Labels", {}), **labels}},
            "rootfs": {"type": "layers", "diff_ids": diff_ids}}


def check_image(source: str | Path, lock: Path | None = None, insecure: bool = False,
                progress: Callable[[str], None] = lambda _: None) -> tuple[str, str, Any]:
    """Unpacks the image (a layout folder or a registry reference) and recomputes the environment digest at
    its prefix: (recorded, recomputed, drift). With `lock`, the image must come from exactly that lock."""
    with image_source.unpacked(source, progress, insecure, lock) as image:
        if (image.prefix / env_manifest.MANIFEST).is_file():  # compared with the files as unpacked: hashed once
            drift = manifest_drift(env_manifest.read(image.prefix)[0], image.manifest)
        else:
            drift = check(image.prefix, full=True)
        return image.recorded_environment, image.environment, drift
