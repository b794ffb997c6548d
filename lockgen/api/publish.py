"""Use case `lockgen push`: an exported image goes to a registry through skopeo, and the registry must
hold exactly the layout's manifest digest."""

from __future__ import annotations

from pathlib import Path

from lockgen.adapters import oci_layout, registry
from lockgen.errors import HostError


def push(layout: Path, reference: str, insecure: bool) -> str:
    """Pushes `layout` to `reference` (docker://HOST/REPO:TAG) and returns the digest the registry holds."""
    _, _, local = oci_layout.read_image(layout)
    pushed = registry.push(layout, oci_layout.tag_of(layout), reference, insecure)
    if pushed != local:
        raise HostError(f"the registry holds {pushed}, not the layout's {local}",
                        "the registry rewrote the manifest; push to another")
    return pushed
