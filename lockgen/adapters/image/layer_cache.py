"""The layer cache under `$LOCKGEN_HOME/layers`: a layer's blob kept by digest, found again by the
layer's content key (`oci_layout.layer_key`: paths, modes and digests) or by its diff_id, and
hard-linked into layouts (verified against its digest on each use), so exporting again, or the next
target, tars and compresses only what is new. Entries are written whole (a partial file, then a
rename), so concurrent exports never read half an entry."""

from __future__ import annotations

import json
import os
import tempfile
import threading
from pathlib import Path

from lockgen.adapters.image import oci_layout
from lockgen.adapters.home import lockgen_home
from lockgen.digests import file_digest
from lockgen.model.oci_documents import BlobRef, OciDescriptor
from lockgen.model.oci import IMAGE_PREFIX, LAYER_MEDIA_TYPES


def _partial(folder: Path, name: str) -> Path:
    return folder / f"{name}.{os.getpid()}.{threading.get_ident()}.partial"


class LayerCache:
    """Layers of one compression (gzip or zstd) and level, built or taken from the cache; its entries are
    keyed by both, so a gzip layer is never handed out as a zstd one."""

    def __init__(self, compression: str, level: int, root: Path | None = None) -> None:
        self.compression, self.level = compression, level
        self.suffix = f"gz{level}" if compression == "gzip" else f"zst{level}"  # gzip's entries keep their names
        self.media_type = LAYER_MEDIA_TYPES[compression]
        self.root = root or lockgen_home() / "layers"
        self.root.mkdir(parents=True, exist_ok=True)

    def _linked(self, layout: Path, digest: str, verify: bool = True) -> BlobRef | None:
        """The cached blob of `digest` put into the layout; None when it is gone or its bytes changed."""
        blob = self.root / f"blob-{digest.split(':', 1)[1]}"
        if not blob.is_file():
            return None
        descriptor = oci_layout.link_cached_blob(layout, blob, digest, verify)
        if descriptor is None:
            blob.unlink(missing_ok=True)
        return descriptor

    def _write_entry(self, path: Path, value: dict[str, str]) -> None:
        partial = _partial(path.parent, path.name)
        partial.write_text(json.dumps(value))
        os.replace(partial, path)

    def layer(
        self, tree: Path, files: list[str], layout: Path, known: dict[str, str], prefix: str = IMAGE_PREFIX
    ) -> tuple[OciDescriptor, str, bool]:
        """The layer of `files` of `tree` (under `prefix` in the image) in `layout`: (descriptor, diff_id,
        taken from the cache)."""
        entry = self.root / f"{oci_layout.layer_key(tree, files, prefix, known)}-{self.suffix}.json"
        if entry.is_file():  # same files, same bytes: the tar need not be written again
            recorded = json.loads(entry.read_text())
            descriptor = self._linked(layout, recorded["digest"])
            if descriptor is not None:
                return {"mediaType": self.media_type, **descriptor}, recorded["diff_id"], True
        with tempfile.NamedTemporaryFile(dir=self.root, suffix=".tar", delete=False) as handle:
            tar_path = Path(handle.name)
        try:
            diff_id = oci_layout.write_layer_tar(tree, sorted(files), prefix, tar_path)
            by_diff_id = self.root / f"{diff_id.split(':', 1)[1]}-{self.suffix}.json"
            descriptor = (
                self._linked(layout, json.loads(by_diff_id.read_text())["digest"]) if by_diff_id.is_file() else None
            )
            hit = descriptor is not None
            if not hit:
                partial = _partial(self.root, "compressing")
                oci_layout.compress(tar_path, partial, self.compression, self.level)
                digest = "sha256:" + file_digest(partial)
                os.replace(partial, self.root / f"blob-{digest.split(':', 1)[1]}")
                descriptor = self._linked(layout, digest, verify=False)
                self._write_entry(by_diff_id, {"digest": digest})
            assert descriptor is not None  # a hit, or the blob just written (linked unverified)
            self._write_entry(entry, {"diff_id": diff_id, "digest": descriptor["digest"]})
            return {"mediaType": self.media_type, **descriptor}, diff_id, hit
        finally:
            tar_path.unlink(missing_ok=True)
