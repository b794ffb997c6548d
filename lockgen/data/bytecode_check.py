"""Proves byte code against its source, run by `lockgen check` in a Python of the byte code's own version
(`python -I -S -B bytecode_check.py LIST.json`). Standard library only, like the service launcher.

Python runs a `__pycache__` file without reading its source when the file's header says so: a timestamp
`.pyc` whose recorded mtime and size match the source, an unchecked-hash `.pyc` always, a checked-hash one
when the source's hash matches, whatever code follows the header. So a `.pyc` beside a proven `.py` may
run other code. Each one named in LIST.json (`[[pyc, source, optimize, pyc_sha256, source_sha256], ...]`,
absolute paths) is read once, its bytes and its source's checked against the sha256s the caller hashed (a
proof is kept by them: one of other bytes, a file swapped during the check, proves nothing), its code
unmarshalled and compared with `compile()` of its source at that optimisation level: code objects compare by
their bytecode, constants, names, line tables and nested code, not by the file name they were compiled under.
Prints a JSON list of `[pyc, why]` for the files that are not their source's byte code.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import marshal
import os
import sys
from concurrent.futures import ProcessPoolExecutor

HEADER = 16  # magic, flags, then mtime and size (timestamp) or the source hash (hash-based), PEP 552


def _why_not(item: list) -> str | None:
    pyc, source, optimize, pyc_sha256, source_sha256 = item
    try:
        with open(pyc, "rb") as stream:
            data = stream.read()
        with open(source, "rb") as stream:
            text = stream.read()
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    if hashlib.sha256(data).hexdigest() != pyc_sha256 or hashlib.sha256(text).hexdigest() != source_sha256:
        return "changed while it was checked"
    if data[:4] != importlib.util.MAGIC_NUMBER:
        return "byte code of another Python version"
    try:
        code = marshal.loads(data[HEADER:])
    except (EOFError, ValueError, TypeError):
        return "not byte code"
    try:
        expected = compile(text, source, "exec", dont_inherit=True, optimize=optimize)
    except (SyntaxError, ValueError):
        return "its source does not compile"
    return None if code == expected else "not the byte code of its source"


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as stream:
        items = json.load(stream)
    if len(items) < 64:  # a pool costs more than it saves
        reasons = [_why_not(item) for item in items]
    else:
        with ProcessPoolExecutor(max_workers=max(1, min(16, os.cpu_count() or 1))) as pool:
            reasons = list(pool.map(_why_not, items, chunksize=64))
    json.dump([[item[0], why] for item, why in zip(items, reasons) if why], sys.stdout)


if __name__ == "__main__":
    main()
