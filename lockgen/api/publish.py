"""Use case `lockgen push`: an exported image goes to a registry through skopeo, and the registry must
hold exactly the layout's manifest digest."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from lockgen.adapters import oci_layout, registry
from lockgen.errors import HostError


def push(layout: Path, reference: str, insecure: bool, progress: Callable[[str], None] = lambda _: None) -> str:
    """Pushes `layout` to `reference` (docker://HOST/REPO:TAG) and returns the digest the registry holds."""
    manifest, _, local = oci_layout.read_image(layout)
    layers = manifest.get("layers", [])
    size = sum(int(layer.get("size", 0)) for layer in layers)
    progress(f"pushing {len(layers)} layers ({size / 1e6:,.1f} MB compressed) to {reference}")
    pushed = registry.push(layout, oci_layout.tag_of(layout), reference, insecure, progress)
    if pushed != local:
        raise HostError(f"the registry holds {pushed}, not the layout's {local}",
                        "the registry rewrote the manifest; push to another")
    return pushed
