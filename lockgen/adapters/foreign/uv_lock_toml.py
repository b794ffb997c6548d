"""uv.lock's TOML read fast, exactly as `tomllib` reads it, where the file has the layout uv writes.

`tomllib` is pure Python: it read a 300k-package uv.lock (200 MiB) in about a minute. uv writes one layout:
a preamble (version, requires-python, conflicts, `[options]`, `[manifest]`), then `[[package]]` tables whose
values are one-line basic strings, integers, booleans, one-line inline tables and arrays, with the sub-tables
`[package.X]` (and `[package.X.Y]`) after them. Such a package region is rewritten into JSON by a few regular
expression passes over the whole text and read by the C JSON reader; the preamble, a few KiB, is read by
`tomllib`.

The rewrite is taken only where it cannot read the text otherwise than `tomllib` does; anything else, valid TOML or
not, is read by `tomllib` whole, so its result and its errors are the ones `tomllib` gives. What the rewrite
admits, checked on the text with its strings taken out (the skeleton):
- strings are basic strings whose escapes JSON reads alike (quote, backslash, b f n r t, a `\\uXXXX` that names no
  surrogate, high or low), with no control character, and no string holds ` = `, a brace, `[ ,` or `, ]` (counted in the
  text
  and in the skeleton: the same count), so a key, a brace or an array's edge outside a string is what it looks like;
- outside strings: bare keys, ` = `, integers, `true`/`false`, `[ ] { } ,`, spaces and newlines, and the header
  lines `[[package]]` and `[package.A]`/`[package.A.B]` (bare names); no comment, literal or multi-line string,
  quoted or dotted key, float, date, `null` or `NaN`;
- each inline table on one line (what is left after taking out the innermost one-line tables, again and again,
  holds no brace), each ` = ` outside one a key at the start of a line, its value on the same line;
- the JSON reader then refuses what TOML refuses (a missing comma, an unclosed array), a key given twice is
  refused by the reader's pair hook, and a header TOML would read otherwise than in uv's order (a table given
  twice, over a key, into an inline table, or under a table no header made) sends the text to `tomllib`.
`tests/test_uv_lock_toml.py` holds this against `tomllib` on generated locks and on mutations of them.

The package region is rewritten and read a few MiB at a time (`_CHUNK`), each piece cut where a `[[package]]`
header starts: every rule above is judged within a line or counted (the counts of a whole are the sums of its
pieces'), and a package's sub-tables follow its header, so the pieces read as the whole does. Each package is
handed, as it is read, to the caller's `reduce` (what it keeps of the table), so the whole document of a large lock
is never held at once; `tomllib`'s document, where it reads the text, is reduced the same way. The import hands the
text in the pieces it read the file in (`read_uv_pieces`), each let go of once read, so a 300k-package lock's text
(200 MiB) is not held beside its document either: a piece that starts with a `[[package]]` line is read alone, any
other joined to the unread rest of the one before (the packages read alike however the region is cut at such
lines); where `tomllib` must read the text, it is read whole again.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable
from typing import Any

_FIRST_PACKAGE = "\n[[package]]\n"
_UNESCAPED = r'[^"\\\x00-\x1f\x7f]*'
_STRING = re.compile(f'"{_UNESCAPED}(?:\\\\(?:["\\\\bfnrt]|u(?![dD][89a-fA-F])[0-9a-fA-F]{{4}}){_UNESCAPED})*"')
_HEADER = re.compile(r"\n(?:\[\[package\]\]|\[package(?:\.[A-Za-z0-9_-]+){1,2}\])(?=\n)")
_SKELETON = re.compile(r'[A-Za-z0-9_\-\[\]{}, =\n"]*')
_ONE_LINE_TABLE = re.compile(r"\{[^{}\n]*\}")
_LINE_KEY = re.compile(r"\n([A-Za-z0-9_-]+) = ")
_TRAILING_COMMA = re.compile(r",([ \n]*)\]")
_TRAILING_COMMA_ONLY = re.compile(r",(?=[ \n]*\])")
_LINE_KEY_START = re.compile(r"\n(?=[A-Za-z0-9_-]+ = )")
# a key after `{ ` and after `, `, one pass each: a pattern that starts with its text is searched for that text, where
# one behind a lookbehind was tried at every position (30k packages: 0.37 s, of 0.8 s for the rewrite; 0.15 s now)
_FIRST_INLINE_KEY = re.compile(r"\{ (?=[A-Za-z0-9_-]+ = )")
_NEXT_INLINE_KEY = re.compile(r", (?=[A-Za-z0-9_-]+ = )")
_IN_STRINGS_TOO = (" = ", "{", "}")  # what a string may not hold: the rewrite reads it as syntax
_IN_STRINGS_TOO_RE = (re.compile(r"\[ *,"), _TRAILING_COMMA)


class _NotSimple(Exception):
    """The text is not in the layout the rewrite reads exactly: `tomllib` reads it."""


# characters of the package region rewritten and read at a time: a region's whole tables are made at once and what
# is kept of them is placed among them, so a larger region leaves the document spread over more memory (at 100k
# packages, resident memory after the read: 164 MiB at 4 MiB, 133 at 1 MiB, 122 at 256 KiB, for the same CPU time)
_CHUNK = 1 << 18


def _kept_whole(package: dict[str, Any]) -> dict[str, Any]:
    return package


def read_uv_toml(text: str, reduce: Callable[[dict[str, Any]], Any] = _kept_whole) -> dict[str, Any]:
    """The document `tomllib.loads(text)` gives, read fast where `text` has uv's layout, each table of its
    `package` array passed through `reduce` as it is read (`reduce` must refuse nothing: it is a view of the table,
    judged by whoever reads it)."""
    return read_uv_pieces([text], lambda: text, reduce)


def read_uv_pieces(
    pieces: list[str], again: Callable[[], str], reduce: Callable[[dict[str, Any]], Any] = _kept_whole
) -> dict[str, Any]:
    """`read_uv_toml` of the text in `pieces`, each let go of (taken out of the list) once read: a 300k-package
    uv.lock's text (200 MiB) is not held whole beside its document. Where `tomllib` must read the text, it is got
    whole from `again`."""
    try:
        return _read_simple(pieces, reduce)
    except (_NotSimple, ValueError, RecursionError):
        pieces.clear()
        document = tomllib.loads(again())
        packages = document.get("package")
        if isinstance(packages, list):
            document["package"] = [reduce(p) if isinstance(p, dict) else p for p in packages]
        return document


def _read_simple(
    text: str | list[str], reduce: Callable[[dict[str, Any]], Any] = _kept_whole, chunk: int | None = None
) -> dict[str, Any]:
    """The document, read a piece of `chunk` characters (`_CHUNK`) at a time; `_NotSimple` where it is not simple.
    The text is given whole or as a list of pieces, taken out of it as the reading reaches them: a piece that
    starts with a `[[package]]` line after one that ends with a line end is read alone (the packages read alike
    however the region is cut at such lines), else the unread rest is joined to it."""
    chunk = chunk or _CHUNK
    pieces = [text] if isinstance(text, str) else text
    pieces.reverse()  # taken from the end
    held, start, lead = "", 0, ""  # the text held, where its unread part starts, and a line end read before it

    def header_from(offset: int) -> int:
        """Where in `held` the first `[[package]]` line at or after `start + offset` starts (its newline), joining
        pieces to the unread part until one is found or none is left (-1)."""
        nonlocal held, start, lead
        while (found := held.find(_FIRST_PACKAGE, start + offset)) < 0 and pieces:
            held, start, lead = lead + held[start:] + pieces.pop(), 0, ""  # what was read before `start` let go of
        return found

    first = header_from(0)
    if first < 0:
        raise _NotSimple
    document = tomllib.loads(held[: first + 1])
    if "package" in document:
        raise _NotSimple
    start = first
    packages: list[Any] = []
    while True:  # each piece from the newline before a [[package]] to the one before the next piece's
        end = held.find(_FIRST_PACKAGE, start + chunk)
        at_next_piece = end < 0 and bool(pieces) and held.endswith("\n") and pieces[-1].startswith(_FIRST_PACKAGE[1:])
        if at_next_piece:
            end = len(held) - 1  # the line end that starts the next piece's [[package]] line
        elif end < 0:
            held, start, lead = lead + held[start:], 0, ""  # (a copy only where a piece is read from its start)
            end = header_from(chunk)
            end = len(held) if end < 0 else end  # none left: the rest (every piece taken)
        region = lead + held[start : end + 1]  # and that newline, as the whole region holds it after the piece
        lead = ""
        _check_layout(region)
        sections = json.loads(
            _as_json(region), object_pairs_hook=_table, parse_float=_no_float, parse_constant=_no_float
        )
        del region
        packages += map(reduce, _assembled(sections))
        if at_next_piece:
            held, start, lead = pieces.pop(), 0, "\n"
            continue
        start = end
        if start >= len(held):
            break
    document["package"] = packages
    return document


def _check_layout(region: str) -> None:
    """Refuses (`_NotSimple`) a package region the rewrite could read otherwise than TOML does."""
    stringless = _STRING.sub('""', region)
    if any(region.count(text) != stringless.count(text) for text in _IN_STRINGS_TOO):
        raise _NotSimple
    if any(len(pattern.findall(region)) != len(pattern.findall(stringless)) for pattern in _IN_STRINGS_TOO_RE):
        raise _NotSimple
    skeleton = _HEADER.sub("\n", stringless)
    if not _SKELETON.fullmatch(skeleton) or '"' in skeleton.replace('""', "") or '"" = ' in skeleton:
        raise _NotSimple
    if (
        re.search(r" = *\n", skeleton)
        or re.search(r"\[ *,", skeleton)
        or re.search(r"\n *,", skeleton)  # a line led by a comma: uv writes none, and the rewrite's would vanish
        or any(word in skeleton for word in ("null", "NaN", "Infinity"))
    ):
        raise _NotSimple  # a value on the next line, a comma opening an array or a line, what JSON reads and TOML not
    flat, found = skeleton, 1
    while found:
        flat, found = _ONE_LINE_TABLE.subn("0", flat)
    if "{" in flat or "}" in flat or flat.count(" = ") != len(_LINE_KEY.findall(flat)):
        raise _NotSimple


def _as_json(region: str) -> str:
    """The region as a JSON list of [header, table] pairs ("" for `[[package]]`, `A` or `A.B` for `[package.A]`).
    A key `K = ` becomes `"K": ` (`,"K": ` at a line's start) by inserting the quote where a key starts and then
    replacing every ` = `, which must then each have had one; the passes replace by fixed text: Python 3.11 expands
    a replacement naming a group in Python, once per match (a million of them in a 300k-package lock)."""
    text = region.replace("\n[[package]]\n", '\n}],["",{\n')
    text = re.sub(r"\n\[package\.([A-Za-z0-9_.-]+)\](?=\n)", r'\n}],["\1",{', text)
    separators = text.count(" = ")
    text, at_line_start = _LINE_KEY_START.subn('\n,"', text)
    text, first_inline = _FIRST_INLINE_KEY.subn('{ "', text)
    text, next_inline = _NEXT_INLINE_KEY.subn(', "', text)
    inline = first_inline + next_inline
    text = text.replace(" = ", '": ')
    if at_line_start + inline != separators or " = " in text:
        raise _NotSimple  # a key neither at a line's start nor after `{ ` or `, `
    text = text.replace('{\n,"', '{\n"')  # a table's first key at a line's start, as most are
    text = re.sub(r"\{(\n+),", r"{\1", text)  # after blank lines
    text = _TRAILING_COMMA_ONLY.sub("", text)
    return "[" + text[4:] + "}]]"


def _table(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    table = dict(pairs)
    if len(table) != len(pairs):
        raise _NotSimple  # a key given twice: tomllib names it
    return table


def _no_float(text: str) -> float:
    raise _NotSimple  # uv writes no float: tomllib reads one (its forms are not JSON's)


def _assembled(sections: list[list[Any]]) -> list[dict[str, Any]]:
    """The packages from the [header, table] pairs, each sub-table put where its header says; a header TOML would
    read otherwise (a table given twice, over a key, inside an inline table or one not yet made) is `_NotSimple`."""
    packages: list[dict[str, Any]] = []
    by_header: set[int] = set()  # the tables of the current package its headers made (the others are inline)
    for header, table in sections:
        if header == "":
            packages.append(table)
            by_header = {id(table)}
            continue
        if not packages:
            raise _NotSimple
        *parents, name = header.split(".")
        owner = packages[-1] if not parents else packages[-1].get(parents[0])
        if not isinstance(owner, dict) or id(owner) not in by_header or name in owner:
            raise _NotSimple
        owner[name] = table
        by_header.add(id(table))
    return packages
