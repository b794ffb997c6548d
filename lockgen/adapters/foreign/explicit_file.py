"""An `@EXPLICIT` file (`conda list --explicit`, `conda-lock render --kind explicit`) for `lockgen import`: one
platform, named in its `# platform:` line; its conda archives by URL with their md5 or sha256, and the
`# pip NAME @ URL#sha256=HASH` lines conda-lock writes below them (its pip packages, for `pip install` after the
conda ones). Recognised by its `@EXPLICIT` line; it takes `--allow-partial` alone.
"""

from __future__ import annotations

import re
from pathlib import Path

from lockgen.adapters.foreign.conda_entries import folder_of, pip_entry, sort_into, split_conda_file
from lockgen.adapters.foreign.foreign_format import ForeignFile, Imported
from lockgen.adapters.pypi.python_wheels import UnhashedWheel
from lockgen.errors import LockFormatError
from lockgen.model.lock import LockedPackage, PackageHash
from lockgen.model.names import shown
from lockgen.model.requests import ImportOptions

_PIP_LINE = re.compile(
    r"# pip (?P<name>[A-Za-z0-9][A-Za-z0-9._-]*) @ (?P<url>[^#\s]+)(#sha256=(?P<sha256>[0-9a-f]{64}))?\s*"
)


class ExplicitFile:
    """An @EXPLICIT file as a `ForeignFormat`."""

    name = "@EXPLICIT file"
    described = "an @EXPLICIT file"
    producer = "conda list --explicit"
    takes = frozenset({"allow_partial"})
    refuses: tuple[str, ...] = ("a pip line's sdist",)

    def recognises(self, file: ForeignFile) -> bool:
        # split into lines only where the word is (a large uv.lock's lines are many strings), a piece at a time (no
        # line is cut between two)
        return any("@EXPLICIT" in piece and "@EXPLICIT" in piece.splitlines() for piece in file.pieces)

    def read(self, file: ForeignFile, options: ImportOptions) -> Imported:
        packages, skipped, hashless = _explicit(file.text, file.path)
        return Imported("@EXPLICIT", (), tuple(packages), file.sha256, tuple(skipped), unhashed=tuple(hashless))


def _explicit(text: str, path: Path) -> tuple[list[LockedPackage], list[str], list[UnhashedWheel]]:
    """The conda archives of an @EXPLICIT file, and the pip packages of its `# pip` lines (a wheel without a sha256
    to be pinned from the folder it lies in)."""
    platform = next(
        (line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("# platform:")), None
    )
    if platform is None:
        raise LockFormatError(f"`{path}` has no `# platform:` line", "explicit files name their platform in a comment")
    packages: list[LockedPackage] = []
    skipped: list[str] = []
    unhashed: list[UnhashedWheel] = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("# pip "):
            found = _PIP_LINE.fullmatch(line)
            if found is None:
                raise LockFormatError(
                    f"`{path}`: `{shown(line)}` is not `# pip NAME @ URL#sha256=HASH`",
                    "use the file `conda-lock render --kind explicit` wrote",
                )
            url = found["url"]
            pip = pip_entry(found["name"], None, url, PackageHash(sha256=found["sha256"]), platform, folder_of(url))
            sort_into(pip, packages, skipped, unhashed)
            continue
        if not line or line.startswith(("#", "@")):
            continue
        url, _, digest = line.partition("#")
        _, name, version, build = split_conda_file(url)
        hashes = (
            PackageHash(sha256=digest.removeprefix("sha256:"))
            if digest.startswith("sha256:") or len(digest) == 64
            else PackageHash(md5=digest or None)
        )
        packages.append(
            LockedPackage(
                name=name, version=version, manager="conda", platform=platform, url=url, hash=hashes, build=build
            )
        )
    return packages, skipped, unhashed
