"""`export --base docker://…`: a base image named in a registry, read shallow (manifest and config only),
as the command line hands it to the export use case (a local base is a plain `Path`)."""

from __future__ import annotations

from lockgen.model.base import Frozen


class RegistryBase(Frozen):
    reference: str  # docker://HOST[:PORT]/REPO@sha256:HEX, or :TAG (resolved to the digest and recorded)
    insecure: bool = False  # plain HTTP or a self-signed registry (a loopback one)
