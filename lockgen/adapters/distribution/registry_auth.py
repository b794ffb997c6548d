"""Where registry credentials come from: the files skopeo and podman read (containers-auth.json(5)), in
their order: `$REGISTRY_AUTH_FILE`, `${XDG_RUNTIME_DIR}/containers/auth.json` (what `skopeo login`
writes), `${XDG_CONFIG_HOME:-~/.config}/containers/auth.json`, then `~/.docker/config.json`.

An entry is `{"auths": {KEY: {"auth": base64("user:password")}}}`; KEY is a host (`HOST[:PORT]`, a
docker config's `https://HOST/v1/` too) or a namespace (`HOST/ORG/REPO`: the longest match wins).
Credential helpers (`credHelpers`, `credsStore`) are not run. A credential is returned to the one
client that sends it to its registry after a challenge, and never printed or written anywhere.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from pathlib import Path

from lockgen.adapters import user_files
from lockgen.core import nesting
from lockgen.errors import UserError


def auth_files() -> list[Path]:
    """The auth files, in the order they are searched."""
    files = [Path(os.environ["REGISTRY_AUTH_FILE"])] if os.environ.get("REGISTRY_AUTH_FILE") else []
    if os.environ.get("XDG_RUNTIME_DIR"):
        files.append(Path(os.environ["XDG_RUNTIME_DIR"]) / "containers" / "auth.json")
    files.append(Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "containers" / "auth.json")
    files.append(Path.home() / ".docker" / "config.json")
    return files


def _normalised(key: str) -> str:
    """A docker config key as a containers one: no scheme, no trailing `/v1/` or `/v2/`."""
    return re.sub(r"/(v1|v2)?/?$", "", re.sub(r"^https?://", "", key))


def credential(host: str, repository: str) -> tuple[str, str] | None:
    """(user, password) for `host/repository` from the first auth file that has an entry for it."""
    wanted = [f"{host}/{'/'.join(repository.split('/')[:n])}" for n in range(repository.count("/") + 1, 0, -1)] + [host]
    for path in auth_files():
        if not path.is_file():
            continue
        try:
            document = nesting.loads(user_files.read_bytes(path, user_files.STACK_LIMIT, "auth file").decode("utf-8"))
        except (OSError, ValueError) as exc:
            raise UserError(
                f"cannot read the registry auth file `{path}` ({type(exc).__name__})",
                'it must be JSON: {"auths": {"HOST": {"auth": "<base64 of user:password>"}}}',
            ) from None
        auths = document.get("auths") if isinstance(document, dict) else None
        entries = {_normalised(k): v for k, v in (auths or {}).items() if isinstance(k, str) and isinstance(v, dict)}
        for key in wanted:
            encoded = entries.get(key, {}).get("auth")
            if isinstance(encoded, str) and encoded:
                return _pair(encoded, path, key)
    return None


def _pair(encoded: str, path: Path, key: str) -> tuple[str, str]:
    try:
        user, colon, password = base64.b64decode(encoded, validate=True).decode().partition(":")
    except (binascii.Error, ValueError):
        user, colon, password = "", "", ""
    if not colon:
        raise UserError(
            f"the auth entry for `{key}` in `{path}` is not base64 of user:password",
            f"log in again: `skopeo login {key.split('/')[0]}`",
        )
    return user, password
