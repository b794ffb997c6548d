"""Byte code proven against its source: a `__pycache__/X.<tag>[.opt-N].pyc` beside a proven `X.py` counts as
that source's only when its code is what the source compiles to (`lockgen/data/bytecode_check.py`, run
by a Python of the file's own tag). Python runs a timestamp `.pyc` whose header matches the source's
mtime and size, and an unchecked-hash one always, without reading the source: without this proof a
`.pyc` could run other code while every check passed.

The Python that proves it is one of this host's (the running one, `python3.Y` on PATH, or one uv
manages), never the environment's or an image's own program: checking must not run what it checks.
Where no Python of that tag is here, its byte code is unproven and said so. A proof is kept under
`$LOCKGEN_HOME/bytecode` by (tag, sha256 of the `.pyc`, sha256 of the source), so each pair is compiled
once per machine and later checks hash only."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path

from lockgen.adapters.home import lockgen_home
from lockgen.adapters.parallel import hash_files
from lockgen.adapters.tool_runner import run_tool
from lockgen.adapters.pypi.uv_resolver import uv_binary
from lockgen.errors import LockgenError

CHECKER = Path(__file__).resolve().parents[2] / "data" / "bytecode_check.py"
_TAG = re.compile(r"\.(?P<tag>cpython-3(?P<minor>\d+))(?:\.opt-(?P<opt>[12]))?\.pyc$")
LAYOUT = "v1"
SECONDS_PER_FILE = 0.5  # compile time of one large module on a slow core: the checker's timeout scales with it


def _store() -> Path:
    return lockgen_home() / "bytecode" / LAYOUT


@lru_cache(maxsize=None)
def _cache_tag_of(python: str) -> str | None:
    try:
        done = run_tool(
            [python, "-I", "-S", "-c", "import sys; print(sys.implementation.cache_tag)"],
            "asking a Python its version",
            timeout_s=30,
        )
    except LockgenError:
        return None
    return done.stdout.strip()


@lru_cache(maxsize=None)
def interpreter_for(tag: str) -> str | None:
    """A Python of this host whose byte code has cache tag `tag` (`cpython-312`), or None."""
    if sys.implementation.cache_tag == tag:  # the running Python: nothing to start
        return sys.executable
    minor = tag.removeprefix("cpython-3")
    for candidate in (shutil.which(f"python3.{minor}"), f"/usr/bin/python3.{minor}"):
        if candidate and os.path.isfile(candidate) and _cache_tag_of(candidate) == tag:
            return candidate
    try:  # last: one uv manages (asking uv starts a process)
        found = run_tool(
            [uv_binary(), "python", "find", "--no-project", "--no-python-downloads", f"3.{minor}"],
            "finding a Python",
            timeout_s=30,
            check=False,
        ).stdout.strip()
    except LockgenError:
        return None
    return found if found and os.path.isfile(found) and _cache_tag_of(found) == tag else None


def unproven(
    prefix: Path,
    pairs: Sequence[tuple[str, str]],
    progress: Callable[[str], None] = lambda _: None,
    known: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Of `(pyc, source)` pairs (prefix-relative; the source already proven), the byte code files that are not
    their source's, each with the reason. `known`: sha256 of files as they are now (what conformance just
    hashed or trusted by fingerprint), not hashed again."""
    if not pairs:
        return {}
    tagged = [(pyc, source, _TAG.search(pyc)) for pyc, source in pairs]
    problems = {
        pyc: "byte code of a Python lockgen cannot prove (only CPython 3 .pyc files are)"
        for pyc, _, found in tagged
        if found is None
    }
    known = known or {}
    wanted = sorted({p for pyc, source, found in tagged if found for p in (pyc, source) if p not in known})
    hashed = hash_files([(str(prefix / p), os.lstat(prefix / p).st_size) for p in wanted])
    digests = {**known, **{p: hashed[str(prefix / p)] for p in wanted}}
    store = _store()
    proven = set(os.listdir(store)) if store.is_dir() else set()  # one listing, not a stat per marker
    pending: dict[str, list[tuple[str, str, int, Path, str, str]]] = {}
    for pyc, source, found in tagged:
        if found is None:
            continue
        marker = f"{found['tag']}-{digests[pyc]}-{digests[source]}"
        if marker not in proven:
            pending.setdefault(found["tag"], []).append(
                (pyc, source, int(found["opt"] or 0), store / marker, digests[pyc], digests[source])
            )
    for tag, items in sorted(pending.items()):
        problems.update(_prove(prefix, tag, items, progress))
    return problems


def _prove(
    prefix: Path, tag: str, items: list[tuple[str, str, int, Path, str, str]], progress: Callable[[str], None]
) -> dict[str, str]:
    """The byte code of `items` that is not its source's; a proof is kept (a marker named by both sha256s) only
    of a pair the checker found to be those very bytes, read once."""
    python = interpreter_for(tag)
    if python is None:
        why = (
            f"no Python 3.{tag.removeprefix('cpython-3')} on this host to prove it (uv python install "
            f"3.{tag.removeprefix('cpython-3')})"
        )
        return {pyc: why for pyc, *_ in items}
    progress(f"proving {len(items)} byte-code files against their sources with {python}")
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as listing:
        json.dump(
            [
                [str(prefix / pyc), str(prefix / source), optimize, pyc_sha, source_sha]
                for pyc, source, optimize, _, pyc_sha, source_sha in items
            ],
            listing,
        )
    try:
        done = run_tool(
            [python, "-I", "-S", "-B", str(CHECKER), listing.name],
            "proving byte code against its source",
            "the checker is lockgen's own; run again with -v",
            timeout_s=60 + SECONDS_PER_FILE * len(items),
        )
    finally:
        os.unlink(listing.name)
    found = {os.path.relpath(path, prefix): why for path, why in json.loads(done.stdout or "[]")}
    _store().mkdir(parents=True, exist_ok=True)
    for pyc, _, _, marker, _, _ in items:
        if pyc not in found:
            marker.touch()
    return found
