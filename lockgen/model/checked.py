"""Checked string fields that more than one model holds: an NVIDIA driver version and a glibc version, as a
stack's target states them and as a node's facts report them. One rule each, with its message."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

_DRIVER = re.compile(r"^\d{1,4}(\.\d{1,4}){1,2}$")
_GLIBC = re.compile(r"^\d{1,3}\.\d{1,3}$")


def _driver(value: str) -> str:
    if not _DRIVER.fullmatch(value):
        raise ValueError(f"driver `{value}` must be a Linux driver version like `550.54.15`")
    return value


def _glibc(value: str) -> str:
    if not _GLIBC.fullmatch(value):
        raise ValueError(f"glibc `{value}` must be a major.minor like `2.28`")
    return value


DriverVersion = Annotated[str, AfterValidator(_driver)]
GlibcVersion = Annotated[str, AfterValidator(_glibc)]
