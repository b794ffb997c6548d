"""A registry image reference, `docker://HOST[:PORT]/REPO[:TAG][@sha256:HEX]`, parsed by the OCI
distribution-spec's grammar (repository path components, tags, digests), with the host always named:
lockgen talks to the registry itself for attestations and has no default registry."""

from __future__ import annotations

import re
from dataclasses import dataclass

from lockgen.model.names import shown
from lockgen.errors import UserError
from lockgen.model.oci import is_tag

_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REPOSITORY = re.compile(rf"^{_COMPONENT}(?:/{_COMPONENT})*$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_HOST = re.compile(r"^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:]+\])(?::[0-9]{1,5})?$")
FORM = "docker://HOST[:PORT]/REPO:TAG or docker://HOST[:PORT]/REPO@sha256:HEX"


@dataclass(frozen=True)
class ImageReference:
    host: str  # HOST[:PORT], as the registry is reached
    repository: str
    tag: str | None
    digest: str | None

    @property
    def name(self) -> str:
        """HOST/REPO: the image's name without tag or digest (an attestation's subject name)."""
        return f"{self.host}/{self.repository}"

    @property
    def reference(self) -> str:
        """What to ask the registry's manifests endpoint for: the digest when given, else the tag."""
        return self.digest or self.tag or "latest"

    def at(self, digest: str) -> str:
        """`docker://HOST/REPO@DIGEST`, for messages."""
        return f"docker://{self.name}@{digest}"

    def __str__(self) -> str:
        return (
            f"docker://{self.name}" + (f":{self.tag}" if self.tag else "") + (f"@{self.digest}" if self.digest else "")
        )


def refuse_credentials(text: str, what: str = "the image reference") -> None:
    """Refuses a reference (docker:// or another skopeo transport's) with user info before its host, without
    repeating it: credentials come from the auth files `skopeo login` writes and are never written by lockgen."""
    if "@" in text.partition("://")[2].lstrip("/").split("/", 1)[0]:  # `docker:///alice:pw@host/…` too
        raise UserError(
            f"{what} carries credentials (USER:PASSWORD@HOST)",
            "log in with `skopeo login HOST` and name the image as docker://HOST/REPO:TAG or "
            "docker://HOST/REPO@sha256:…",
        )


def parse_reference(text: str) -> ImageReference:
    """`text` as a reference, or one error saying which part is wrong (credentials refused unrepeated)."""
    refuse_credentials(text)
    said = shown(text)  # echoed on one line, control characters escaped
    if not text.startswith("docker://"):
        raise UserError(f"`{said}` is not a registry reference", f"name the image as {FORM}")
    rest = text.removeprefix("docker://")
    host, _, path = rest.partition("/")
    if not path or not _HOST.fullmatch(host) or not ("." in host or ":" in host or host == "localhost"):
        raise UserError(f"`{said}` does not start with a registry host", f"name the registry: {FORM}")
    path, _, digest = path.partition("@")
    repository, tag = path, None
    last = path.rsplit("/", 1)[-1]
    if ":" in last:
        repository, tag = path.rsplit(":", 1)
    if not _REPOSITORY.fullmatch(repository):
        raise UserError(
            f"`{shown(repository)}` in `{said}` is not a repository name (lowercase components separated by /)",
            f"name the image as {FORM}",
        )
    if tag is not None and not is_tag(tag):
        raise UserError(
            f"`{shown(tag)}` in `{said}` is not a tag", "a tag is letters, digits, `_`, `.` and `-`, at most 128"
        )
    if digest and not _DIGEST.fullmatch(digest):
        raise UserError(
            f"`{shown(digest)}` in `{said}` is not a sha256 digest", "write it as @sha256: and 64 lowercase hex digits"
        )
    return ImageReference(host, repository, tag, digest or None)
