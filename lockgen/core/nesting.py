"""The nesting bound of every JSON document lockgen reads (certificates, index pages, image layouts, records,
credentials, node facts): no real one is nested past a dozen levels, while Python's parser gives up only at its
recursion limit (a RecursionError, which is no ValueError and so no refusal). `loads` measures the depth on the
bytes first, outside strings, one level per pass over the brackets, and refuses past `MAX_DEPTH` with a
`TooDeepError`, a ValueError: every caller's handling of a malformed document (a refusal naming the file, or a
re-check where the document is only a record) takes it as it takes any other."""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DEPTH = 64
_INNERMOST = re.compile(rb"\[\]|\{\}")
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'"[]{}')


class TooDeepError(ValueError):
    """A document nested deeper than `MAX_DEPTH`."""


def depth_within(data: bytes, limit: int = MAX_DEPTH) -> bool:
    """Whether JSON `data` nests no deeper than `limit` (brackets inside strings not counted). A bracket left
    unclosed counts as a level: the parser would descend into it before finding the document broken."""
    if data.count(b"[") + data.count(b"{") <= limit:
        return True
    # the strings taken out, in C: escaped backslashes, then escaped quotes, then all but quotes and brackets go;
    # what lies between the quotes that are left is outside every string
    brackets = b"".join(
        data.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_STRUCTURE).split(b'"')[::2]
    )
    for level in range(limit + 1):
        shorter = _INNERMOST.sub(b"", brackets)  # one level, the innermost pairs, per pass
        if len(shorter) == len(brackets):
            return level + brackets.count(b"[") + brackets.count(b"{") <= limit
        brackets = shorter
    return False


def loads(data: bytes | str, limit: int = MAX_DEPTH) -> Any:
    """`json.loads(data)`, refused (TooDeepError) where it nests deeper than `limit`."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if not depth_within(raw, limit):
        raise TooDeepError(f"nested deeper than {limit} levels")
    return json.loads(data)
