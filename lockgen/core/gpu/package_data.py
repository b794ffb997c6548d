"""The one data loader of `core`: the files shipped in `lockgen/data` (GPU facts and performance envelopes,
JSON; the image service launcher's source, bytes), read through `importlib.resources` once per process,
and the facts file `$LOCKGEN_FACTS` names in their place. Nothing else in `core` reads files."""

from __future__ import annotations

import json
import os
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from lockgen.errors import UserError


@lru_cache(maxsize=None)
def load_json(name: str) -> Any:
    """The parsed content of `lockgen/data/<name>`."""
    return json.loads(resources.files("lockgen.data").joinpath(name).read_text(encoding="utf-8"))


@lru_cache(maxsize=None)
def data_bytes(name: str) -> bytes:
    """The bytes of `lockgen/data/<name>` (the service launcher an image runs, written into it as it is)."""
    return resources.files("lockgen.data").joinpath(name).read_bytes()


FACTS_ENV = "LOCKGEN_FACTS"
PACKAGED_FACTS = "lockgen/data/gpu_facts.json"


def facts_origin() -> str:
    """Where the GPU facts come from, without reading them: `$LOCKGEN_FACTS` when set, else `PACKAGED_FACTS`."""
    return os.environ.get(FACTS_ENV) or PACKAGED_FACTS


def facts_overridden() -> bool:
    """Whether `$LOCKGEN_FACTS` names the facts (even a path spelled as `PACKAGED_FACTS`, from a checkout)."""
    return bool(os.environ.get(FACTS_ENV))


def facts_document() -> tuple[Any, str]:
    """(the GPU facts document, where it came from): `$LOCKGEN_FACTS` when set (newer facts without a new
    lockgen release), else the packaged `gpu_facts.json`."""
    override = os.environ.get(FACTS_ENV)
    if not override:
        return load_json("gpu_facts.json"), PACKAGED_FACTS
    try:
        return json.loads(Path(override).read_text(encoding="utf-8")), override
    except OSError as exc:
        raise UserError(
            f"${FACTS_ENV} names {override}, which cannot be read ({exc.strerror or exc})",
            f"point {FACTS_ENV} at a facts file (lockgen facts --json shows the packaged one's form), or unset it",
        ) from None
    except ValueError as exc:
        raise UserError(
            f"${FACTS_ENV} file {override} is not JSON ({exc})",
            f"fix the file, or unset {FACTS_ENV} to use the packaged facts",
        ) from None
