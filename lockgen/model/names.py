"""Names as lockgen compares them, in the lowest layer so models validate with them too: Python
projects by PEP 503 (runs of `-`, `_`, `.` are one `-`, case folded) and GPU archs (`SM_90` -> `sm90`); and
user-supplied text as a one-line message shows it."""

from __future__ import annotations

import re

MACHINE_OF_PLATFORM = {"linux-64": "x86_64", "linux-aarch64": "aarch64"}  # conda subdir -> `uname -m`
PLATFORM_OF_MACHINE = {machine: platform for platform, machine in MACHINE_OF_PLATFORM.items()}


CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")  # what breaks a line, a terminal or a tool's line-based input


def shown(text: str, limit: int = 120) -> str:
    """User-supplied text fit for a one-line message: cut to `limit`, control characters escaped."""
    return text[:limit].encode("unicode_escape").decode("ascii")


def normalize(name: str) -> str:
    """The PEP 503 normalised form of a project name (`Foo_Bar.baz` -> `foo-bar-baz`)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def normalize_arch(name: str) -> str:
    """An arch as lockgen writes it: lower case, no underscore (`SM_90` -> `sm90`)."""
    return name.lower().replace("_", "")
