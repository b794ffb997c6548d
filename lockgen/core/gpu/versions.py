"""Small, exact version arithmetic for CUDA releases and driver versions (dotted integers)."""

from __future__ import annotations


def as_tuple(version: str) -> tuple[int, ...]:
    """`"550.54.15"` -> `(550, 54, 15)`; non-numeric parts end the tuple."""
    parts: list[int] = []
    for piece in version.split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits or digits != piece:
            if digits and piece.startswith(digits):
                parts.append(int(digits))
            break
        parts.append(int(digits))
    return tuple(parts)


def major_minor(version: str) -> tuple[int, int]:
    """The (major, minor) of a dotted version; a missing minor is 0."""
    parts = as_tuple(version) + (0, 0)
    return parts[0], parts[1]


def mm_text(value: tuple[int, int]) -> str:
    return f"{value[0]}.{value[1]}"
