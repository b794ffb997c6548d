"""Names as lockgen compares them, in the lowest layer so models validate with them too: Python
projects by PEP 503 (runs of `-`, `_`, `.` are one `-`, case folded) and GPU archs (`SM_90` -> `sm90`); and
text that is not lockgen's own (a path, a certificate's or a lock's value, an image's file name) as a person is
shown it: `escaped` is the one rule, for every line lockgen prints and every message naming such text."""

from __future__ import annotations

import re

MACHINE_OF_PLATFORM = {"linux-64": "x86_64", "linux-aarch64": "aarch64"}  # conda subdir -> `uname -m`
PLATFORM_OF_MACHINE = {machine: platform for platform, machine in MACHINE_OF_PLATFORM.items()}


CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")  # what breaks a line, a terminal or a tool's line-based input


# what a terminal or a reader would take for something else than the text: controls (newline, carriage return,
# ESC, which starts every ANSI and OSC sequence, the C1 codes, CSI among them), the line and paragraph separators,
# the marks and overrides that reorder or hide text (bidi, zero-width), and lone surrogates (no encoding writes them)
UNSHOWABLE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb\ud800-\udfff]"
)


def escaped(text: str) -> str:
    """`text` as one line a terminal shows as it is: each character of UNSHOWABLE written as its Python escape
    (`\\n`, `\\x1b`, `\\u202e`), every other character as given."""
    return UNSHOWABLE.sub(lambda found: found.group().encode("unicode_escape").decode("ascii"), text)


LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _byte_escape(found: re.Match[str]) -> str:
    code = ord(found.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else escaped(found.group())


def undecoded_escaped(text: str) -> str:
    """A name made of a file's name (a node's, a path) as UTF-8 can carry it, and so strict JSON: each byte its
    decoding could not read (held as a lone surrogate by Python's surrogateescape, `\\udcff`) written as its escape
    (`\\xff`, the byte the name has), any other lone surrogate as `escaped` writes it; the rest as given."""
    return LONE_SURROGATE.sub(_byte_escape, text)


def shown(text: str, limit: int = 120) -> str:
    """User-supplied text fit for a one-line message: cut to `limit`, then `escaped`."""
    return escaped(text[:limit])


def normalize(name: str) -> str:
    """The PEP 503 normalised form of a project name (`Foo_Bar.baz` -> `foo-bar-baz`). A name holding no `_`, `.`
    or `--` has no run of separators to fold: it is only lowered (an import of 300k packages asks millions of times)."""
    if "_" not in name and "." not in name and "--" not in name:
        return name.lower()
    return re.sub(r"[-_.]+", "-", name).lower()


def normalize_arch(name: str) -> str:
    """An arch as lockgen writes it: lower case, no underscore (`SM_90` -> `sm90`)."""
    return name.lower().replace("_", "")
