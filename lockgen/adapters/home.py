"""This machine as lockgen sees it: its conda platform, and where lockgen keeps things: its home (`$LOCKGEN_HOME`,
default `~/.lockgen`: the
package store, environments, the layer cache, read manifests) and its download cache
(`$LOCKGEN_CACHE_DIR`, default `~/.cache/lockgen`: channel indexes, rattler's cache of them).
The stack model (pydantic, 0.1 s to import) is imported only to name the platform: a repeated
`check --lock` needs the home alone."""

from __future__ import annotations

import os

TYPE_CHECKING = False  # pathlib, platform: imported where a Path is made (not on the kept `run`'s path)
if TYPE_CHECKING:
    from pathlib import Path


def home_folder() -> str:
    """lockgen's home as a string, for a caller that imports no pathlib: `$LOCKGEN_HOME`, else `~/.lockgen`."""
    return os.environ.get("LOCKGEN_HOME") or os.path.join(os.path.expanduser("~"), ".lockgen")


def lockgen_home() -> Path:
    from pathlib import Path

    return Path(home_folder())


def cache_dir() -> Path:
    """Where lockgen keeps downloaded indexes: `$LOCKGEN_CACHE_DIR`, else `~/.cache/lockgen`."""
    from pathlib import Path

    return Path(os.environ.get("LOCKGEN_CACHE_DIR") or Path.home() / ".cache" / "lockgen")


def store_envs() -> Path:
    """The folder of materialized environments in the store."""
    return lockgen_home() / "envs"


def machine() -> str:
    """This host's `uname -m`."""
    import platform as host_platform

    return host_platform.machine()


def native_platform(default: str = "") -> str:
    """This host's conda platform (`linux-64`, `linux-aarch64`), or `default` when lockgen knows none."""
    from lockgen.model.names import PLATFORM_OF_MACHINE

    return PLATFORM_OF_MACHINE.get(machine(), default)


def system_and_machine() -> str:
    """This host's OS and machine as certificates name them (`linux-x86_64`)."""
    import platform as host_platform

    return f"{host_platform.system().lower()}-{machine()}"
