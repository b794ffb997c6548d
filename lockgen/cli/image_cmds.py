"""`lockgen export` and `lockgen push`: a lock's environment becomes an OCI image layout, and a layout goes to a
registry."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from lockgen.cli.ui import fail, handles_errors, print_json, progress, say


@handles_errors
def export(
    lock: Path = typer.Argument(..., help="A lock written by lockgen resolve (or pin)."),
    out: Path = typer.Option(..., "--out", help="The OCI image layout folder to write."),
    platform: list[str] = typer.Option(
        [],
        "--platform",
        "-p",
        help="Which platform of the lock (default: this host's); repeated, one image per platform under one image "
        "index.",
    ),
    all_platforms: bool = typer.Option(
        False, "--all-platforms", help="An image index of every platform the lock locks."
    ),
    tag: Optional[str] = typer.Option(
        None, "--tag", help="The tag in the layout (default: <target>-<platform>, or <target> for an index)."
    ),
    layers: int = typer.Option(100, "--layers", help="Layer budget: one per package up to this, then grouped."),
    compression: str = typer.Option(
        "gzip",
        "--compression",
        help="Layer compression: gzip, or zstd (smaller, faster to unpack; podman and containerd read it, older "
        "Docker engines do not).",
    ),
    level: int = typer.Option(
        1, "--compression-level", help="Level of new layers (gzip 1 fast ... 9 small, zstd 1 ... 19)."
    ),
    base: Optional[str] = typer.Option(
        None,
        "--base",
        help="A base image (a CUDA runtime, a Debian slim): an OCI layout, "
        "or docker://HOST/REPO@sha256:… (or :TAG), read shallow: its layers are not downloaded. "
        "A pure-PyPI lock needs one with its pythonX.Y, a conda python one "
        "with glibc.",
    ),
    insecure: bool = typer.Option(
        False, "--insecure", help="With --base docker://…: plain HTTP or a self-signed registry."
    ),
    fmt: str = typer.Option(
        "oci-layout", "--format", help="oci-layout (a folder), oci-archive or docker-archive (a file)."
    ),
    from_prefix: Optional[Path] = typer.Option(
        None,
        "--from-prefix",
        help="Export this existing environment (it must conform to the lock) instead of building one.",
    ),
    from_image: Optional[str] = typer.Option(
        None,
        "--from-image",
        help="Make this vendor image (a layout or docker://REF), "
        "whose environment must conform to the lock, lockgen's image of it: its "
        "layers kept as they are, one added with the environment's record.",
    ),
    manifests: Optional[Path] = typer.Option(
        None, "--manifests", help="With --from-prefix or --from-image: a manifests bundle (no network)."
    ),
    image_prefix: Optional[str] = typer.Option(
        None,
        "--image-prefix",
        help="With --from-prefix: its path in the image (default: the same path, so its scripts stay right); with "
        "--from-image: where the environment is in it (default: its label, else /opt/env).",
    ),
    allow_foreign: list[str] = typer.Option(
        [],
        "--allow-foreign",
        help="With --from-prefix or --from-image: a file no package states that you accept in the image. Repeatable.",
    ),
    as_json: bool = typer.Option(
        False,
        "--json",
        help="Print {image_digest, environment_digest, out, format} as JSON (environment_digests, per platform, for "
        "an index).",
    ),
) -> None:
    """Write the lock's environment (at /opt/env, at its base's prefix, or an existing one at its path) as an OCI
    image; print the digest."""
    if (
        from_prefix is None
        and from_image is None
        and (manifests is not None or image_prefix is not None or allow_foreign)
    ):
        fail(
            "--manifests, --image-prefix and --allow-foreign go with --from-prefix or --from-image",
            "lockgen export LOCK --from-prefix DIR --out LAYOUT",
            2,
        )
    if from_image is not None and (from_prefix is not None or base is not None):
        fail("--from-image is the image's own environment, on its own layers", "drop --from-prefix and --base", 2)
    if tag is not None:
        from lockgen.model.oci import is_tag
        from lockgen.model.names import shown

        if not is_tag(tag):
            fail(
                f"--tag `{shown(tag, 80)}` is not an image tag",
                "a tag is letters, digits, `_`, `.` and `-`, at most 128, not starting with `.` or `-`",
                2,
            )
    several = all_platforms or len(platform) > 1
    if all_platforms and platform:
        fail("--all-platforms and --platform exclude each other", "pass one, or --platform once per platform", 2)
    if several and (from_prefix is not None or base is not None or from_image is not None):
        fail(
            "an image index of several platforms is built from the lock, on no base image",
            "drop --from-prefix and --base, or export one --platform",
            2,
        )
    from lockgen.api.export import export as run
    from lockgen.cli.ui import Meter
    from lockgen.model.requests import ExportRequest, FromImage, FromLock, FromPrefix, Layering

    source: FromLock | FromPrefix | FromImage = FromLock(tuple(platform), several)
    if from_image is not None:
        source = FromImage(from_image, insecure, manifests, image_prefix, tuple(allow_foreign))
    elif from_prefix is not None:
        source = FromPrefix(from_prefix, manifests, image_prefix, tuple(allow_foreign))
    request = ExportRequest(
        lock,
        out,
        source,
        _base_image(from_image or base, insecure, fmt),
        tag,
        Layering(layers, compression, level),
        fmt,
    )
    from lockgen.model.results import ExportedIndex

    with Meter() as meter:
        result = run(request, progress, meter)
    if isinstance(result, ExportedIndex):
        for name, env_digest in result.environment_digests.items():
            progress(f"{name}: environment digest sha256:{env_digest}")
        if as_json:
            print_json(
                {
                    "image_digest": result.digest,
                    "environment_digests": result.environment_digests,
                    "out": str(out),
                    "format": fmt,
                }
            )
        else:
            say(result.digest)
        return
    progress(f"environment digest sha256:{result.environment_digest}")
    if as_json:
        print_json(
            {
                "image_digest": result.digest,
                "environment_digest": result.environment_digest,
                "out": str(out),
                "format": fmt,
            }
        )
    else:
        say(result.digest)


def _base_image(base: Optional[str], insecure: bool, fmt: str):
    """`--base` as the export takes it: a layout's Path, or a registry reference to read shallow."""
    if base is None or "://" not in base:
        if insecure:
            fail("--insecure goes with --base docker://…", "drop --insecure for a local --base LAYOUT", 2)
        return Path(base) if base is not None else None
    if fmt != "oci-layout":
        fail(
            f"a {fmt} holds every blob, and a registry's --base leaves its layers in its registry",
            "export an oci-layout (then lockgen push it), or pass a local layout",
            1,
        )
    from lockgen.model.base_image import RegistryBase

    return RegistryBase(reference=base, insecure=insecure)


@handles_errors
def push(
    layout: Path = typer.Argument(..., help="An OCI layout made by lockgen export."),
    reference: str = typer.Argument(..., help="Where: docker://HOST[:PORT]/REPO:TAG."),
    insecure: bool = typer.Option(False, "--insecure", help="Plain HTTP or a self-signed registry (loopback tests)."),
    attest: Optional[Path] = typer.Option(
        None,
        "--attest",
        help="Also attach this certificate to the pushed image as a signed in-toto attestation (as lockgen attest "
        "does).",
    ),
    key: Optional[Path] = typer.Option(
        None, "--key", help="With --attest: the Ed25519 key to sign the attestation with."
    ),
    sbom: Optional[Path] = typer.Option(
        None, "--sbom", help="With --attest: also attach this SBOM (export's sbom.cdx.json)."
    ),
) -> None:
    """Push an exported image with skopeo; print the manifest digest, which stays the layout's."""
    from lockgen.api.publish import push as run

    if (attest is None) != (key is None) or (sbom is not None and attest is None):
        fail(
            "--attest and --key go together (and --sbom with them)",
            "lockgen push DIR docker://REF --attest CERT --key KEY",
            2,
        )
    say(run(layout, reference, insecure, progress, (attest, key) if attest and key else None, sbom))
