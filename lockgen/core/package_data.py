"""The one data loader of `core`: the JSON files shipped in `lockgen/data` (GPU facts, performance
envelopes), read through `importlib.resources` once per process. Nothing else in `core` reads files."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any


@lru_cache(maxsize=None)
def load_json(name: str) -> Any:
    """The parsed content of `lockgen/data/<name>`."""
    return json.loads(resources.files("lockgen.data").joinpath(name).read_text(encoding="utf-8"))
