"""The local folders a lock's `file:` URLs may name: only those the user names in `$LOCKGEN_FILE_ROOTS`
(folders separated by `:`). A lock is input (a pull request, a mirror): without this, a `file:` URL would
make lockgen, often as root, read any file of the machine that carries an archive's name (its content is
never shown, but a pinned hash would confirm a guess of it). The path is judged after every link in it
is resolved, so a link inside a root that leads out of it is refused too. Resolving against a `file://`
channel the stack names needs no root: the stack is the user's own; the lock it writes is then read
under the roots like any other."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote, urlsplit

from lockgen.model.names import shown
from lockgen.errors import UserError

VARIABLE = "LOCKGEN_FILE_ROOTS"


def roots() -> list[Path]:
    """The folders `$LOCKGEN_FILE_ROOTS` names (absolute ones only), links resolved."""
    return [Path(entry).resolve() for entry in os.environ.get(VARIABLE, "").split(os.pathsep) if entry.startswith("/")]


def local_path(url: str, what: str) -> Path:
    """The file a `file:` URL names, when it lies under one of the user's roots; else a UserError naming the
    folder to add."""
    path = Path(unquote(urlsplit(url).path))
    real = path.resolve()
    if not any(real == root or root in real.parents for root in roots()):
        named = os.environ.get(VARIABLE)
        raise UserError(
            f"{what} names the local file {shown(str(path))}, outside the folders lockgen reads local "
            f"packages from ({'$' + VARIABLE + '=' + shown(named) if named else '$' + VARIABLE + ' is not set'})",
            f"if you trust that folder, name it: export {VARIABLE}={shown(str(real.parent))}"
            + (f":{shown(named)}" if named else ""),
        )
    return path
