"""What makes an image its lock's beyond its environment, pure: the environment its config runs (CONDA_PREFIX,
and the first `…/bin` on PATH under it), the config itself against the one export writes from the lock, and
every layer member outside that environment accounted for by the image's pinned base (the base's layers) or
refused, like any whiteout over the environment or device node in it in the layers after the base's (export
writes neither). A member is judged where it landed (`LayerEntry.path`), not where its name says.

Each difference is one line naming it; the callers read the image and hand its values here."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any

from lockgen.core.image.image_config import is_environment_prefix
from lockgen.errors import UserError
from lockgen.model.image import ImageConfig, LayerEntry
from lockgen.model.oci import PREFIX_LABEL

_SHOWN = 3  # members named per layer; the rest counted


def environment_prefix(config: ImageConfig, asked: str | None) -> str:
    """The environment the image's config runs: its CONDA_PREFIX, which PATH's first `…/bin` entry must be under;
    refused when the prefix label, or the `--image-prefix` asked for, names another folder."""
    prefix = config.config.variable("CONDA_PREFIX") or ""
    if not is_environment_prefix(prefix):
        raise UserError(
            f"the image's config names no environment it runs (CONDA_PREFIX is `{prefix[:80]}`)",
            "check --image --lock proves images lockgen export wrote; export this one with lockgen export LOCK "
            "--from-image IMAGE --image-prefix PATH",
        )
    first = next((entry for entry in (config.config.variable("PATH") or "").split(":") if entry.endswith("/bin")), None)
    if first != f"{prefix}/bin":
        raise UserError(
            f"the image runs `{first or 'nothing'}` first on its PATH, not its environment's {prefix}/bin "
            "(CONDA_PREFIX)",
            "re-export the image from the lock: lockgen export LOCK",
        )
    labels = config.config.labels or {}
    for what, named in ((f"its label {PREFIX_LABEL}", labels.get(PREFIX_LABEL)), ("--image-prefix", asked)):
        if named is not None and named != prefix:
            raise UserError(
                f"{what} names the environment at {named[:80]}, but the image's config runs {prefix} "
                "(CONDA_PREFIX and PATH)",
                "the environment checked is the one the image runs: drop --image-prefix, or re-export the image "
                "so the two agree",
            )
    return prefix


def _shown(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 120 else text[:117] + "..."


def _object(value: object) -> Mapping[str, object]:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def config_differences(expected: Mapping[str, object], found: Mapping[str, object]) -> list[str]:
    """Each way the image's config differs from the one export writes (`expected`), one line each."""
    lines = [
        f"image: config {key} is {_shown(found.get(key))}, export writes {_shown(expected.get(key))}"
        for key in sorted(set(expected) | set(found))
        if key != "config" and expected.get(key) != found.get(key)
    ]
    want, have = _object(expected.get("config")), _object(found.get("config"))
    for key in sorted(set(want) | set(have)):
        if want.get(key) == have.get(key):
            continue
        found_value = have.get(key)
        if key == "Env" and isinstance(found_value, list):
            wanted_lines = _list(want.get(key))
            added = [line for line in found_value if line not in wanted_lines]
            lacking = [line for line in wanted_lines if line not in found_value]
            said = [f"adds {_shown(added)}"] * bool(added) + [f"lacks {_shown(lacking)}"] * bool(lacking)
            lines.append(
                f"image: config Env {' and '.join(said) or 'is in another order'} (export writes "
                f"{_shown(want.get(key))})"
            )
        elif key == "Labels" and isinstance(found_value, dict):
            labels = _object(want.get(key))
            lines += [
                f"image: config label {name} is {_shown(found_value.get(name))}, "
                f"export writes {_shown(labels.get(name))}"
                for name in sorted(set(labels) | set(found_value))
                if labels.get(name) != found_value.get(name)
            ]
        else:
            lines.append(f"image: config {key} is {_shown(have.get(key))}, export writes {_shown(want.get(key))}")
    return lines


def _touches(target: str, prefix: str) -> bool:
    """Whether what a whiteout removes is the environment, in it, or a folder holding it."""
    target = target.rstrip("/")
    return not target or target == prefix or target.startswith(prefix + "/") or prefix.startswith(target + "/")


def _named(paths: list[str]) -> str:
    more = len(paths) - _SHOWN
    return ", ".join(f"/{p}" for p in paths[:_SHOWN]) + (f" and {more} more" if more > 0 else "")


def outside_problems(layers: list[tuple[LayerEntry, ...]], base_layers: int, image_prefix: str) -> list[str]:
    """The members of the layers after the base's (`base_layers` of them) that lie outside the environment at
    `image_prefix` (the folders holding it excepted), their whiteouts over the environment and their device
    nodes in it: one line a layer for each."""
    prefix = image_prefix.strip("/")
    holders = {str(p) for p in PurePosixPath(prefix).parents if str(p) != "."}
    lines = []
    for number, entries in enumerate(layers[base_layers:], base_layers + 1):
        over = [e.removes or "/" for e in entries if e.removes is not None and _touches(e.removes, prefix)]
        outside = [e.path for e in entries if not _accounted(e, prefix, holders)]
        devices = [f"{e.path} ({e.device})" for e in entries if e.device is not None and _accounted(e, prefix, holders)]
        if devices:
            lines.append(
                f"image: layer {number} puts a device node at {_named(devices)} in the environment at "
                f"{image_prefix} (export writes none)"
            )
        if over:
            lines.append(
                f"image: layer {number} removes {_named(over)} by a whiteout, over the environment at "
                f"{image_prefix} (export writes no whiteout)"
            )
        if outside:
            after = f"after the base's {base_layers} layers" if base_layers else "the image has no base"
            lines.append(
                f"image: layer {number} adds {_named(outside)} outside the environment at {image_prefix} "
                f"({after}: nothing accounts for it)"
            )
    return lines


def _accounted(entry: LayerEntry, prefix: str, holders: set[str]) -> bool:
    """A member in the environment, a folder holding it, or a whiteout over it (reported as such)."""
    if entry.removes is not None:
        return _touches(entry.removes, prefix)
    return entry.path == prefix or entry.path.startswith(prefix + "/") or (entry.path in holders and entry.folder)
