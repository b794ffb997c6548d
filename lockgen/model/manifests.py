"""Package manifests: what a package's own archive says it installs (a wheel's `RECORD`, a conda
package's `info/paths.json`), keyed by the archive's sha256, the hash the lock pins. A bundle of them
lets a machine without network check an environment against its lock.

Paths are as the archive writes them: wheel-relative for wheels (placed by the installer's scheme at
check time), prefix-relative for conda packages (`site-packages/...` and `python-scripts/...` placed for
noarch-python ones). A distribution no index publishes (`installed`) has the rows of its installed RECORD,
already prefix-relative, and its dist-info folder likewise.
"""

from __future__ import annotations

from typing import Literal

from lockgen.model.base import Frozen

MANIFESTS_FORMAT = 1


class ManifestFile(Frozen):
    """One file of a package: path, hex sha256 and size as the archive states them; a conda file with a
    prefix placeholder names it (its installed bytes are the archive's with the prefix written in)."""

    path: str
    sha256: str | None = None
    size: int | None = None
    kind: Literal["file", "link"] = "file"
    placeholder: str | None = None
    text_mode: bool = True
    target: str | None = None  # a link's target, as the archive holds it
    executable: bool | None = (
        # installed with an exec bit (the archive member's mode); None: not known (a bundle or an installed RECORD)
        None
    )


class PackageManifest(Frozen):
    """Everything needed to say which files a package puts into a prefix, and with which content."""

    sha256: str
    name: str
    version: str
    kind: Literal["wheel", "conda", "installed"]
    files: tuple[ManifestFile, ...]
    dist_info: str | None = None  # the `NAME-VERSION.dist-info` folder (prefix-relative when installed)
    scripts: tuple[str, ...] = ()  # console/gui scripts (wheels) or entry points (noarch python)
    entry_points: dict[str, str] = {}  # script name -> `module:attr`, what its launcher must call
    noarch_python: bool = False
    source: str = ""  # where it was read: a wheel URL, an archive in the store


class ManifestBundle(Frozen):
    """Manifests for `lockgen check --manifests` on a machine that cannot read the packages themselves."""

    format: int = MANIFESTS_FORMAT
    manifests: tuple[PackageManifest, ...]
