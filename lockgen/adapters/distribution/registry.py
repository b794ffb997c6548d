"""Pushes an OCI layout to a registry, and pulls one back, through skopeo (its credential handling:
`skopeo login`, auth files), keeping the manifest digest byte for byte."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from lockgen.adapters.tool_runner import find_tool, run_tool


def push(layout: Path, tag: str, reference: str, insecure: bool, progress: Callable[[str], None]) -> str:
    """Copies `layout:tag` to `reference` (docker://HOST/REPO:TAG) and returns the digest the registry holds."""
    destination = reference if "://" in reference else f"docker://{reference}"
    with tempfile.TemporaryDirectory() as folder:
        digest_file = Path(folder) / "digest"
        _copy(
            ["--digestfile", str(digest_file)] + ["--dest-tls-verify=false"] * insecure,
            f"oci:{layout}:{tag}",
            destination,
            f"pushing to {destination}",
            "push images",
            progress,
        )
        return digest_file.read_text().strip()


def pull(reference: str, layout: Path, insecure: bool, progress: Callable[[str], None]) -> None:
    """Copies `reference` (docker://HOST/REPO:TAG, or another skopeo transport) into the OCI layout `layout`."""
    _copy(
        ["--src-tls-verify=false"] * insecure,
        reference,
        f"oci:{layout}:pulled",
        f"pulling {reference}",
        "pull images",
        progress,
    )


def _copy(
    options: list[str], source: str, destination: str, what: str, purpose: str, progress: Callable[[str], None]
) -> None:
    """`skopeo copy`; a refusal is one clear error with skopeo's last line; a line every few seconds while it runs."""
    run_tool(
        [_skopeo(purpose), "copy", *options, source, destination],
        what,
        "check the reference, `skopeo login`, and --insecure for a plain-HTTP registry",
        timeout_s=3600,
        heartbeat=lambda seconds: progress(f"{what}: {seconds:.0f} s"),
    )


def _skopeo(purpose: str) -> str:
    return find_tool("skopeo", f"install it (Debian: apt-get install skopeo) to {purpose}")


def to_docker_archive(layout: Path, tag: str, destination: Path) -> None:
    """A `docker load`-able archive of the layout, written by skopeo (byte-stable for the same layout)."""
    run_tool(
        [_skopeo("write docker archives"), "copy", f"oci:{layout}:{tag}", f"docker-archive:{destination}:{tag}"],
        "writing the docker archive",
        timeout_s=3600,
    )
