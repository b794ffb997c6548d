"""Whether an image's file system holds a file at a path, decided from its layers' tar members read top layer
down, pure: what export proves before it writes a venv that runs on its base image's Python.

The rules are the image-spec's (`layer.md`, "Whiteouts") as a runtime mounts the layers: a layer's member
replaces what the layers below have at that path; `D/.wh.NAME` removes `D/NAME` and all below it from the
layers below, `D/.wh..wh..opq` hides everything the layers below have in `D`, and either leaves what the same
layer itself holds; a member that is not a folder where the path needs one ends the path. A symbolic link
(at the path or at a folder on the way) is followed through the whole file system again: an absolute target
from the image's root, a relative one from the link's folder, `..` stopping at the root as in a container;
at most `MAX_LINKS` links, as a kernel gives up on a loop. The callers read each layer's members once
(`layer(index)`, bottom layer 0) and only as far down as a decision needs."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from lockgen.model.image import OPAQUE, WHITEOUT, LayerEntry

MAX_LINKS = 16
Layer = Mapping[str, LayerEntry]  # one layer's members by path (relative, no leading `/`)


def _normal(parts: list[str]) -> list[str]:
    """`parts` with `.` dropped and `..` taking one folder off, never above the root."""
    kept: list[str] = []
    for part in parts:
        if part == "..":
            kept = kept[:-1]
        elif part not in ("", "."):
            kept.append(part)
    return kept


def _followed(folder: list[str], target: str, rest: list[str]) -> str:
    """Where a link in `folder` to `target` leads, with the rest of the path after it."""
    start = [] if target.startswith("/") else folder
    return "/".join(_normal([*start, *target.split("/"), *rest]))


def _decide(layer: Layer, parts: list[str], folders: set[str]) -> tuple[str, str] | None:
    """What one layer says of the path `parts`: ("file", path), ("gone", path) (removed, a folder, or not a
    folder where the path needs one), ("link", where it leads), or None when it holds nothing of it. `folders`:
    the path's folders the layers above hold as folders (which hide anything else below them); this layer's
    are added."""
    path = "/".join(parts)
    for depth in range(1, len(parts) + 1):
        here = "/".join(parts[:depth])
        entry = layer.get(here)
        if entry is None:
            continue
        if depth == len(parts) and entry.link is None:
            return ("gone" if entry.folder else "file"), path
        if here in folders and not entry.folder:  # a folder above hides this file or link
            return "gone", path
        if entry.link is not None:
            return "link", _followed(parts[: depth - 1], entry.link, parts[depth:])
        if not entry.folder:
            return "gone", path
        folders.add(here)
    for depth in range(1, len(parts) + 1):  # nothing of the path in this layer: does it hide what lies below?
        folder = "/".join(parts[: depth - 1])
        whiteout = f"{folder}/{WHITEOUT}{parts[depth - 1]}".lstrip("/")
        opaque = f"{'/'.join(parts[:depth])}/{OPAQUE}" if depth < len(parts) else None
        if whiteout in layer or (opaque is not None and opaque in layer):
            return "gone", path
    return None


def file_at(path: str, layer: Callable[[int], Layer], count: int) -> str | None:
    """The path (links followed) of the file the image's `count` layers hold at `path`, or None when the image
    has none there (absent, removed by a whiteout, a folder, or more than `MAX_LINKS` links on the way). Layers
    are read from the top (`layer(count - 1)`) down, and no further than the first that decides."""
    parts = _normal(path.split("/"))
    for _ in range(MAX_LINKS + 1):  # bounded: each round follows one link
        folders: set[str] = set()
        decided = next(
            (d for d in (_decide(layer(index), parts, folders) for index in range(count - 1, -1, -1)) if d), None
        )
        if decided is None or decided[0] == "gone":
            return None
        if decided[0] == "file":
            return decided[1]
        parts = decided[1].split("/") if decided[1] else []
    return None
