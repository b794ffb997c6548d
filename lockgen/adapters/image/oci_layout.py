"""Writes and reads OCI image layouts: deterministic tar layers, gzip without name or time or zstd
(single-threaded, content size and checksum always written), blobs by sha256, canonical JSON for
config, manifest and index.

Layers: entries sorted, mtime 0, uid/gid 0, no user names, modes 0755/0644 (directories and
executables / everything else), PAX format (conda paths exceed USTAR's limits), hardlinks stored as
regular files (inode layout differs between machines), symlinks kept. The diff_id (sha256 of the
uncompressed tar) is the layer's identity; compressed blobs are cached by it.

Reading: one image, or through an image index the image of one architecture; a layer's members, read only
when asked (`layer_reader`); unpacking by `layer_extract`, every path resolved inside the root; a shallow layout
(`export --base docker://…`) lacks its base's layer blobs, which its
index.json descriptor says where to find (`base_source`), and unpacking it is refused in one error.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import shutil
import stat
import tarfile
import tempfile
import zlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import IO, Any, BinaryIO, cast

import zstandard
from pydantic import ValidationError

from lockgen.adapters import user_files
from lockgen.adapters.image import layer_extract
from lockgen.core import nesting
from lockgen.digests import canonical_json, file_digest
from lockgen.errors import LockFormatError, UserError
from lockgen.core.image.image_platform import choose_manifest
from lockgen.model.image import ImageConfig, ImageIndex, ImageManifest, LayerEntry
from lockgen.model.json_values import JsonObject
from lockgen.model.names import shown
from lockgen.model.oci_documents import BlobRef, OciConfig, OciDescriptor, OciIndex, OciManifest
from lockgen.model.oci import (
    BASE_SOURCE_ANNOTATION,
    IMAGE_CONFIG_MEDIA_TYPES,
    INDEX_MEDIA_TYPE,
    READABLE_LAYER_MEDIA_TYPES,
    REF_NAME,
)


def _info(name: str, kind: bytes, mode: int, size: int = 0, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.size, info.linkname = kind, mode, size, link
    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
    return info


def write_layer_tar(root: Path, relatives: list[str], image_prefix: str, destination: Path) -> str:
    """A deterministic tar of `root/relative` files under `image_prefix`; returns the diff_id."""
    prefix = image_prefix.strip("/")
    directories = {str(p) for rel in relatives for p in PurePosixPath(prefix, rel).parents if str(p) != "."}
    with destination.open("wb") as raw:
        with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
            entries = sorted([(d, None) for d in directories] + [(f"{prefix}/{rel}", rel) for rel in relatives])
            for name, relative in entries:
                if relative is None:
                    tar.addfile(_info(name + "/", tarfile.DIRTYPE, 0o755))
                    continue
                path = root / relative
                info = path.lstat()
                if stat.S_ISLNK(info.st_mode):
                    tar.addfile(_info(name, tarfile.SYMTYPE, 0o777, link=os.readlink(path)))
                elif stat.S_ISDIR(info.st_mode):
                    tar.addfile(_info(name + "/", tarfile.DIRTYPE, 0o755))
                else:
                    mode = 0o755 if info.st_mode & 0o111 else 0o644
                    with path.open("rb") as stream:
                        tar.addfile(_info(name, tarfile.REGTYPE, mode, info.st_size), stream)
    return "sha256:" + file_digest(destination)


def layer_key(root: Path, relatives: list[str], image_prefix: str, known: dict[str, str]) -> str:
    """What `write_layer_tar`'s bytes are a function of, without writing them: its rules (versioned here:
    change the tag when they change), the prefix, and per file its path, kind, exec bit and content
    digest (taken from `known` where given) or link target."""
    hasher = hashlib.sha256(f"lockgen-layer-tar/1 {image_prefix}\n".encode())
    for relative in sorted(relatives):
        path = root / relative
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            line = f"L {relative} {os.readlink(path)}"
        elif stat.S_ISDIR(info.st_mode):
            line = f"D {relative}"
        else:
            line = (
                f"F {relative} {bool(info.st_mode & 0o111)} {info.st_size} "
                f"{known.get(relative) or file_digest(path, follow=False)}"
            )
        hasher.update(line.encode() + b"\n")
    return hasher.hexdigest()


def write_archive(layout: Path, destination: Path) -> None:
    """An `oci-archive`: the layout folder as one deterministic tar (same rules as layers, no prefix)."""
    relatives = sorted(str(p.relative_to(layout)) for p in layout.rglob("*") if p.is_file())
    with destination.open("wb") as raw, tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for directory in sorted({str(PurePosixPath(r).parent) for r in relatives} - {"."}):
            tar.addfile(_info(directory + "/", tarfile.DIRTYPE, 0o755))
        for relative in relatives:
            with (layout / relative).open("rb") as stream:
                tar.addfile(_info(relative, tarfile.REGTYPE, 0o644, (layout / relative).stat().st_size), stream)


def compress(tar_path: Path, destination: Path, compression: str, level: int) -> None:
    """`tar_path` compressed into `destination`, the same bytes on every run and host of one zlib or zstd
    version: gzip with no name and mtime 0; zstd in one frame, single-threaded (its multi-threaded mode
    cuts the input by worker), with the content size and checksum always written."""
    with tar_path.open("rb") as source, destination.open("wb") as raw:
        if compression == "zstd":
            compressor = zstandard.ZstdCompressor(level=level, write_checksum=True, write_content_size=True, threads=0)
            compressor.copy_stream(source, raw, size=tar_path.stat().st_size)
            return
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=level) as zipped:
            shutil.copyfileobj(source, zipped, 1 << 20)


@contextmanager
def uncompressed_stream(path: Path, media_type: str) -> Iterator[IO[bytes]]:
    """The tar stream of the layer blob at `path`, a regular file (`user_files`: a FIFO there is refused, not waited
    on)."""
    with user_files.opened(path) as raw, uncompressed(raw, media_type) as stream:
        yield stream


@contextmanager
def uncompressed(raw: IO[bytes], media_type: str) -> Iterator[IO[bytes]]:
    """The tar stream of a layer blob by its media type (OCI's or Docker's): zstd, uncompressed, else gzip. A
    blob that is not what its media type says (gzip labelled zstd, cut short) is one `LockFormatError`."""
    try:
        if media_type.endswith("zstd"):
            with zstandard.ZstdDecompressor().stream_reader(raw, closefd=False) as stream:
                yield stream
        elif media_type.endswith(".tar"):
            yield raw
        else:
            with gzip.GzipFile(fileobj=raw, mode="rb") as stream:
                yield cast(IO[bytes], stream)  # a GzipFile reads as IO[bytes]; its stub says BufferedIOBase
    except (zstandard.ZstdError, gzip.BadGzipFile, zlib.error, EOFError) as exc:
        raise LockFormatError(
            f"a layer is not the {media_type} it is labelled: {exc}",
            "the image's layer is damaged or mislabelled: re-export or re-pull it",
        ) from None


def members(stream: IO[bytes]) -> dict[str, LayerEntry]:
    """A layer's tar stream's members by path (relative, no leading `./` or `/`; a symbolic link with its
    target), read in one pass; a tar that is not one is one error."""
    found = {}
    try:
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            for member in tar:
                path = member.name.removeprefix("./").strip("/")
                found[path] = LayerEntry(path, member.isdir(), member.linkname if member.issym() else None)
    except (tarfile.TarError, EOFError) as exc:
        raise LockFormatError(
            f"a layer is not a readable tar: {exc}", "the image's layer is damaged: re-export or re-pull it"
        ) from None
    return found


def put_blob(layout: Path, data: bytes) -> BlobRef:
    digest = hashlib.sha256(data).hexdigest()
    path = layout / "blobs" / "sha256" / digest
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return {"digest": f"sha256:{digest}", "size": len(data)}


def put_blob_file(layout: Path, source: Path) -> BlobRef:
    """Copies `source` into the layout's blobs under its digest, hashing as it copies (one read)."""
    folder = layout / "blobs" / "sha256"
    folder.mkdir(parents=True, exist_ok=True)
    hasher, size = hashlib.sha256(), 0
    with (
        tempfile.NamedTemporaryFile(dir=folder, prefix=".partial-", delete=False) as target,
        source.open("rb") as stream,
    ):
        for block in iter(lambda: stream.read(1 << 20), b""):
            hasher.update(block)
            target.write(block)
            size += len(block)
    os.replace(target.name, folder / hasher.hexdigest())
    return {"digest": f"sha256:{hasher.hexdigest()}", "size": size}


def link_cached_blob(layout: Path, source: Path, digest: str, verify: bool = True) -> BlobRef | None:
    """Puts a layer cache's blob (named by its digest, never written in place by lockgen) into the layout
    as a hard link, or a copy across file systems; None when `verify` finds its bytes changed."""
    if verify and "sha256:" + file_digest(source) != digest:
        return None
    folder = layout / "blobs" / "sha256"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / digest.split(":", 1)[1]
    if not target.exists():
        try:
            os.link(source, target)
        except OSError:
            shutil.copyfile(source, target)
    return {"digest": digest, "size": source.stat().st_size}


def write_index(
    layout: Path, document: OciManifest | OciIndex, tag: str, annotations: dict[str, str] | None = None
) -> str:
    """Writes `document` (an image manifest, or an image index of one per platform), `index.json` naming it
    `tag` (with `annotations` on its descriptor: outside the manifest digest), and `oci-layout`; returns the
    document's digest."""
    descriptor: OciDescriptor = {
        "mediaType": document["mediaType"],
        **put_blob(layout, canonical_json(document)),
        "annotations": {**(annotations or {}), REF_NAME: tag},
    }
    index = {"schemaVersion": 2, "mediaType": INDEX_MEDIA_TYPE, "manifests": [descriptor]}
    (layout / "index.json").write_bytes(canonical_json(index))
    (layout / "oci-layout").write_bytes(canonical_json({"imageLayoutVersion": "1.0.0"}))
    return descriptor["digest"]


def base_source(layout: Path) -> str | None:
    """Where a shallow layout's base blobs live (`HOST/REPO@sha256:…`), as its index.json descriptor records it."""
    try:
        entry = nesting.loads(user_files.read_bytes(layout / "index.json"))["manifests"][0]
        source = entry.get("annotations", {}).get(BASE_SOURCE_ANNOTATION)
    except (OSError, ValueError, KeyError, IndexError, TypeError, AttributeError):
        return None
    return source if isinstance(source, str) else None


def missing_blobs(layout: Path, manifest: OciManifest) -> list[OciDescriptor]:
    """The layer descriptors of `manifest` whose blobs `layout` does not hold; a blob it holds as anything but a
    regular file (a FIFO, a device, a folder) is refused naming it, not counted missing (then pushed from a base,
    or handed to skopeo, which would wait on a FIFO for ever)."""
    absent: list[OciDescriptor] = []
    for layer in manifest["layers"]:
        stream = held_blob(layout, layer["digest"])
        if stream is None:
            absent.append(layer)
        else:
            stream.close()
    return absent


_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def _malformed(layout: Path | str, what: str) -> LockFormatError:
    return LockFormatError(f"`{layout}` is not a well-formed OCI image: {what}", "pass a folder made by lockgen export")


def _invalid(layout: Path | str, what: str, exc: ValidationError) -> LockFormatError:
    """The first field a document's validation refused, as one error."""
    error = exc.errors()[0]
    field = ".".join(str(part) for part in error["loc"])
    return _malformed(layout, f"its {what}" + (f" field {field}" if field else "") + f": {error['msg']}")


def digest_at(layout: Path | str, holder: Any, where: str) -> str:
    """The digest of a descriptor, refused unless it is `sha256:` and 64 hex digits (it names a file)."""
    digest = holder.get("digest") if isinstance(holder, dict) else None
    if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
        raise _malformed(layout, f"{where} has no sha256 digest")
    return digest


def blob_path(layout: Path, digest: str) -> Path:
    return layout / "blobs" / "sha256" / digest.split(":", 1)[1]


def read_image(
    layout: Path, architecture: str | None = None, tag: str | None = None
) -> tuple[OciManifest, OciConfig, str]:
    """(manifest, config, manifest digest) of the layout's image tagged `tag` (its single image when no tag is
    asked), or with `architecture` of its linux/`architecture` image when that names an image index; blobs
    are checked against their digests, and the structure every reader relies on is checked once (`check_image`)."""

    def blob(descriptor: Any, where: str, what: str) -> JsonObject:
        digest = digest_at(layout, descriptor, where)
        data = user_files.read_bytes(blob_path(layout, digest))
        if "sha256:" + hashlib.sha256(data).hexdigest() != digest:
            raise LockFormatError(f"blob {digest} of {layout} was changed", "the image was tampered with: re-export it")
        _sized(layout, descriptor, len(data), what)
        document = nesting.loads(data)
        if not isinstance(document, dict):
            raise _malformed(layout, f"its {what} is not a JSON object")
        return document

    try:
        index = nesting.loads(user_files.read_bytes(layout / "index.json"))
        entry: OciDescriptor | JsonObject = tagged_entry(layout, index, tag)
        if isinstance(entry, dict) and entry.get("mediaType") == INDEX_MEDIA_TYPE:
            if architecture is None:
                raise LockFormatError(
                    f"`{layout}` holds an image index (one image per platform), not one image",
                    "copy one platform out first: skopeo copy --override-arch arm64 oci:DIR:TAG oci:ONE:TAG",
                )
            entry = choose_manifest(blob(entry, "index.json's manifest", "image index"), architecture, f"`{layout}`")
        digest = digest_at(layout, entry, "index.json's manifest")
        manifest = blob(entry, "index.json's manifest", "manifest")
        config = blob(manifest.get("config"), "the manifest's config", "config")
    except (OSError, ValueError) as exc:
        raise LockFormatError(
            f"`{layout}` is not a readable OCI image layout: {exc}", "pass a folder made by lockgen export"
        ) from None
    checked_manifest, checked_config = checked_documents(layout, manifest, config)
    return checked_manifest, checked_config, digest


def _sized(layout: Path, descriptor: Mapping[str, object], size: int, what: str) -> None:
    """Refuses a blob whose descriptor gives another size (a runtime refuses it: the size bounds its read)."""
    if descriptor.get("size") != size:
        raise LockFormatError(
            f"the {what} of {layout} is {size} bytes, its descriptor says {shown(str(descriptor.get('size')), 30)}",
            "the image was tampered with: re-export it",
        )


def tagged_entry(layout: Path, index: Any, tag: str | None) -> OciDescriptor:
    """index.json's descriptor (as written) of the image tagged `tag` (`org.opencontainers.image.ref.name`), or
    its only one when no tag is asked; an index naming two images by one tag, or several images when none is
    named, is refused: a runtime picks by the tag, so the check must read the image the tag names."""
    try:
        typed = ImageIndex.model_validate(index)
    except ValidationError as exc:
        raise _invalid(layout, "index.json", exc) from None
    if not typed.manifests:
        raise _malformed(layout, "index.json lists no manifest")
    names = [(descriptor.annotations or {}).get(REF_NAME) for descriptor in typed.manifests]
    twice = sorted({n for n in names if n is not None and names.count(n) > 1})
    if twice:
        raise LockFormatError(
            f"`{layout}` names two images by the tag `{twice[0]}` in its index.json",
            "a tag names one image: re-export the layout, or copy the one you mean out (skopeo copy)",
        )
    if tag is not None:
        found = [number for number, name in enumerate(names) if name == tag]
        if not found:
            have = ", ".join(sorted(n for n in names if n is not None)) or "none"
            raise UserError(
                f"`{layout}` has no image tagged `{tag}` (its tags: {have})", "name one of its tags: LAYOUT:TAG"
            )
        return index["manifests"][found[0]]
    if len(names) > 1:
        have = ", ".join(n for n in names if n is not None) or "untagged"
        raise UserError(
            f"`{layout}` holds {len(names)} images (tags: {have}), and no tag says which",
            "name the image by its tag: LAYOUT:TAG",
        )
    return index["manifests"][0]


def checked_documents(where: Path | str, manifest: JsonObject, config: JsonObject) -> tuple[OciManifest, OciConfig]:
    """The image's manifest and config as written, once `check_image` has found them of the shape their types
    name (every descriptor's digest, size and media type, the layers, the config's rootfs and run settings)."""
    check_image(where, manifest, config)
    return cast(OciManifest, manifest), cast(OciConfig, config)


def check_image(
    where: Path | str, manifest: Mapping[str, object], config: Mapping[str, object]
) -> tuple[ImageManifest, ImageConfig]:
    """The image's manifest and config as typed values, refused (one error) unless their descriptors, layers,
    diff_ids and labels are what every reader relies on, so a damaged or hostile image (a layout's or a
    registry's) is one error, never a crash further on."""
    try:
        typed_manifest = ImageManifest.model_validate(manifest)
        typed_config = ImageConfig.model_validate(config)
    except ValidationError as exc:
        raise _invalid(where, "manifest or config", exc) from None
    if len(typed_config.rootfs.diff_ids) != len(typed_manifest.layers):
        raise _malformed(
            where, f"its config's rootfs.diff_ids are not one sha256 digest per layer ({len(typed_manifest.layers)})"
        )
    if typed_manifest.config.media_type not in IMAGE_CONFIG_MEDIA_TYPES:  # runtimes refuse it (umoci, containerd)
        raise _malformed(
            where, f"its config's media type `{shown(typed_manifest.config.media_type, 80)}` is no image config's"
        )
    unknown = next(
        (layer.media_type for layer in typed_manifest.layers if layer.media_type not in READABLE_LAYER_MEDIA_TYPES),
        None,
    )
    if unknown is not None:
        raise _malformed(where, f"a layer's media type `{shown(unknown, 80)}` is no layer a runtime unpacks")
    return typed_manifest, typed_config


def tag_of(layout: Path) -> str:
    """The ref name of the layout's image."""
    index = nesting.loads(user_files.read_bytes(layout / "index.json"))
    return index["manifests"][0].get("annotations", {}).get(REF_NAME, "latest")


def layer_reader(layout: Path, architecture: str | None = None) -> tuple[int, Callable[[int], dict[str, LayerEntry]]]:
    """(how many layers the image has, a reader of layer N's members, bottom layer 0), each layer read once
    and only when asked (`core.image.layer_lookup` reads top down, as far as it needs)."""
    manifest, _, _ = read_image(layout, architecture)
    layers, read = manifest["layers"], {}

    def layer(index: int) -> dict[str, LayerEntry]:
        if index not in read:
            try:
                with uncompressed_stream(
                    blob_path(layout, layers[index]["digest"]), layers[index].get("mediaType", "")
                ) as stream:
                    read[index] = members(stream)
            except FileNotFoundError:
                raise _missing(layout, layers[index]["digest"]) from None
            except OSError as exc:
                raise _unreadable(layout, layers[index]["digest"], exc) from None
        return read[index]

    return len(layers), layer


def unpack(
    layout: Path, destination: Path, meter: Callable[[str, int, int], None] | None = None
) -> tuple[tuple[LayerEntry, ...], ...]:
    """Applies every layer in order into `destination` (`layer_extract`: every path resolved inside it), each
    blob checked against its digest and its uncompressed tar against its diff_id first; returns each layer's
    members where they landed, bottom layer first. `meter(phase, done, total)` hears of each layer applied."""
    manifest, config, _ = read_image(layout)
    layers = manifest["layers"]
    with layer_extract.unpacking(destination) as tree:
        for number, (layer, diff_id) in enumerate(zip(layers, config["rootfs"]["diff_ids"]), 1):
            if meter is not None:
                meter("check and unpack layers", number - 1, len(layers))
            with tempfile.TemporaryFile() as plain:
                _checked_tar(layout, layer, diff_id, plain)
                tree.apply(plain, f"layer {number} ({layer['digest'][:19]}…) of `{layout}`")
    if meter is not None:
        meter("check and unpack layers", len(layers), len(layers))
    return tuple(tree.layers)


def _checked_tar(layout: Path, layer: OciDescriptor, diff_id: str, plain: IO[bytes]) -> None:
    """The layer's uncompressed tar written into `plain` (rewound), its blob and diff_id checked."""
    path = blob_path(layout, layer["digest"])
    if not path.exists():
        raise _missing(layout, layer["digest"])
    try:
        blob_hasher = hashlib.sha256()
        with user_files.opened(path) as blob:
            for block in iter(lambda: blob.read(1 << 20), b""):
                blob_hasher.update(block)
    except OSError as exc:
        raise _unreadable(layout, layer["digest"], exc) from None
    if "sha256:" + blob_hasher.hexdigest() != layer["digest"]:
        raise LockFormatError(f"layer blob {layer['digest']} was changed", "the image was tampered with: re-export it")
    _sized(layout, layer, path.stat().st_size, f"layer blob {layer['digest'][:19]}…")
    hasher = hashlib.sha256()
    try:
        with uncompressed_stream(path, layer["mediaType"]) as stream:
            for block in iter(lambda: stream.read(1 << 20), b""):
                hasher.update(block)
                plain.write(block)
    except LockFormatError as exc:  # named by its digest and layout
        raise LockFormatError(f"layer {layer['digest'][:19]}… of `{layout}`: {exc.message}", exc.hint) from None
    if "sha256:" + hasher.hexdigest() != diff_id:
        raise LockFormatError(
            f"layer {layer['digest']} does not match its diff_id {diff_id}", "the image was tampered with: re-export it"
        )
    plain.seek(0)


def open_blob(layout: Path, digest: str) -> BinaryIO:
    """The layout's blob `digest`, open for reading: a regular file (`user_files`), else refused naming it."""
    stream = held_blob(layout, digest)
    if stream is None:
        raise _missing(layout, digest)
    return stream


def held_blob(layout: Path, digest: str) -> BinaryIO | None:
    """The layout's blob `digest` open for reading, None where the layout does not hold it (a shallow layout's base
    layers); one that is no regular file (`user_files`: a FIFO is judged, never waited on) is refused naming it."""
    try:
        return user_files.opened(blob_path(layout, digest))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _unreadable(layout, digest, exc) from None


def blob_bytes(layout: Path, digest: str) -> bytes:
    """The bytes of the layout's blob `digest` (a manifest, a config), read as `open_blob` opens it."""
    with open_blob(layout, digest) as stream:
        return stream.read()


def _unreadable(layout: Path, digest: str, error: OSError) -> LockFormatError:
    return LockFormatError(
        f"layer blob {digest[:19]}… of {layout} cannot be read: {error.strerror or error}",
        "the layout is damaged: copy it whole, or re-export it",
    )


def _missing(layout: Path, digest: str) -> LockFormatError:
    source = base_source(layout)
    if source is not None:  # a shallow export: the base's layers stay in the base's registry
        return LockFormatError(
            f"layer blob {digest[:19]}… of {layout} is the base image's, which this shallow layout does not hold "
            f"(it lives at {source})",
            "push the layout (lockgen push LAYOUT docker://REPO:TAG) and use docker://REPO:TAG, or export on a "
            "local --base LAYOUT",
        )
    return LockFormatError(
        f"layer blob {digest} is missing from {layout}", "the layout is incomplete: copy it whole, or re-export it"
    )
