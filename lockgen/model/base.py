"""The strict, frozen base model every pydantic model of lockgen derives from (the records past a boundary that
import no pydantic, a lock's, a stack's and the GPU facts', are plain dataclasses instead)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    """Immutable, strict about unknown fields; transformations return new values."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, defer_build=True)
