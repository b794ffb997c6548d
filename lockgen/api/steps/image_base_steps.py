"""A step below resolve: the base of a team stack named by its image (`extends = "docker://HOST/REPO@sha256:…"`,
or an OCI layout folder). lockgen's images carry their lock byte for byte (`.lockgen/lock.conda-lock.yml` in
the last layer, whose sha256 is the image's `dev.lockgen.lock.sha256` label, which the image's config, and so
its digest, pins); it is read by streaming that one layer only as far as the file (lockgen's layers are
sorted: `.lockgen/` first), held to the label, and kept beside the team's locks (`locks/_base.conda-lock.yml`),
where export, certs and `resolve --check` find it as they find a base that is a lock file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from lockgen.adapters import home
from lockgen.adapters.image import layer_members
from lockgen.adapters.atomic_files import write_bytes_atomic
from lockgen.api.steps import base_steps
from lockgen.core.image.image_config import is_environment_prefix
from lockgen.core.image.image_reference import refuse_credentials
from lockgen.errors import LockFormatError, UserError
from lockgen.model.base_image import RegistryBase
from lockgen.model.inputs import StackBase
from lockgen.model.oci import LOCK_LABEL, PREFIX_LABEL


def fetch_base_lock(stack_base: StackBase, insecure: bool, progress: Callable[[str], None]) -> bytes:
    """The lock the base image carries, kept where the team stack's base was located (its `path`); its bytes."""
    extends, image = stack_base.extends, stack_base.image
    assert image is not None  # located for a base that is an image
    refuse_credentials(extends, "`extends`")
    if extends.startswith("docker://") and "@sha256:" not in extends:  # a tag moves, and the team lock with it
        raise UserError(
            f'`extends = "{extends}"` names the base image by a tag',
            "name it by its digest, docker://HOST/REPO@sha256:… (lockgen push prints it)",
        )
    base: base_steps.Base = RegistryBase(reference=image, insecure=insecure) if isinstance(image, str) else image
    if isinstance(base, Path) and not (base / "index.json").is_file():
        raise UserError(
            f'`extends = "{extends}"` names no stack.toml, lock file or OCI layout ({base})',
            'name a base stack ("../platform/stack.toml"), a lock, or its image (docker://HOST/REPO@sha256:…)',
        )
    manifest, config, _ = base_steps.base_manifest(base, home.native_platform() or "linux-64", progress)
    labels = (config.get("config") or {}).get("Labels") or {}
    if not labels.get(LOCK_LABEL):
        raise UserError(
            f"the base image {extends} is not lockgen's image of a lock (no {LOCK_LABEL} label)",
            "extend its stack.toml or lock, or make lockgen's image of it: lockgen export LOCK --from-image IMAGE",
        )
    if not is_environment_prefix(str(labels.get(PREFIX_LABEL, ""))):
        raise LockFormatError(
            f"the base image {extends} names its environment at `{str(labels.get(PREFIX_LABEL))[:80]}`, not a "
            "folder inside the image",
            "export the base image again with this lockgen",
        )
    carried = layer_members.carried_lock(base_steps.layer_opener(base), manifest["layers"], labels[PREFIX_LABEL])
    if carried is None or carried[1] != labels[LOCK_LABEL]:
        raise LockFormatError(
            f"the base image {extends} carries no lock, or not the one its label names"
            + (" (an older lockgen exported it)" if carried is None else ""),
            "export the base image again with this lockgen, or extend the base's lock file",
        )
    data, path = carried[0], stack_base.path
    if not path.is_file() or path.read_bytes() != data:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(path, data)
    progress(f"the base image's lock ({labels[LOCK_LABEL][:16]}…) kept as {path}")
    return data
