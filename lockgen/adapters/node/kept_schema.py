"""The certificate body's plain validation (`model.plain_certificate`) without pydantic's models: the validator's
core schema is kept as data (`plain_certificate.kept_form`, written by marshal) under lockgen's home, so a
status that must prove certificates builds its validator with pydantic-core alone (`SchemaValidator`, under a
millisecond) instead of importing pydantic and the models to derive it (about 0.15 s a process).

Where: `$LOCKGEN_HOME/kept/schemas/plain-body-<key>.marshal`, the key the sha256 of what made the schema: the
rules' sources (`kept_verdicts.stamp`: lockgen's version and the sha256 of the certificate's models, their base,
and the plain validation's sources), Python's version (marshal's form is Python's), pydantic's version file and
pydantic-core's version. Another lockgen, another edit of a rule or another pydantic reads another file, so a kept
schema is never one other rules made; the `KEPT_SCHEMAS` most recent are kept, the older removed.

What it trusts: as a kept verdict does, that a file under lockgen's home was written by lockgen (a schema put
there by hand is taken: tests/test_kept_schema.py shows it; no checksum guards it). Kept or made here, a body is
validated by the one kept form (`plain_certificate.kept_form`, held to pydantic's own validator of the models by
the tests); a kept file that cannot be read, or that pydantic-core refuses, is made again and written over; where
this pydantic's schema holds more than data, pydantic's own validator is used and nothing kept. Keeping is
best-effort: a home lockgen cannot write keeps nothing. `LOCKGEN_REPARSE=1` makes the schema from the models
every time."""

from __future__ import annotations

import hashlib
import importlib.util
import marshal
import os
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from lockgen.adapters.atomic_files import write_bytes_atomic
from lockgen.adapters.node.kept_verdicts import stamp
from lockgen.adapters.proof.kept_runs import kept_folder, trusted
from lockgen.errors import UserError

KEPT_SCHEMAS = 4  # schemas kept at most: the most recent, the rest removed when one is written


def plain_body(text: bytes | str) -> dict[str, Any]:
    """The certificate body whose JSON text is `text`, as plain values, when `CertificateBody` accepts it (the
    fields it lists and their types, exactly: `model.plain_certificate`'s rules); `pydantic_core.ValidationError`
    (pydantic's) when this validation refuses it."""
    body: dict[str, Any] = plain_validator().validate_json(text)
    return body


@lru_cache(maxsize=1)
def plain_validator() -> Any:
    """The plain validator: made from the kept schema when one is kept for these rules, else from the models (and
    the schema kept for the next process); where this pydantic's schema holds more than data, as pydantic makes it
    (`plain_certificate.made_validator`), nothing kept."""
    from pydantic_core import SchemaError, SchemaValidator

    path = kept_path()
    if path is not None and trusted():
        try:
            with open(path, "rb") as stream:
                return SchemaValidator(marshal.loads(stream.read()))
        except (OSError, ValueError, EOFError, TypeError, SchemaError):  # none kept, or not one to take
            pass
    from lockgen.model import plain_certificate

    try:
        schema = plain_certificate.kept_form()
    except TypeError:
        return plain_certificate.made_validator()
    validator = SchemaValidator(schema)
    if path is not None:
        _keep(Path(path), marshal.dumps(schema))
    return validator


def _keep(path: Path, data: bytes) -> None:
    """Writes the schema (best-effort: a home lockgen cannot write keeps nothing) and removes all but the
    `KEPT_SCHEMAS` most recent kept beside it (other lockgens', other pydantics')."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(path, data)
        kept = sorted(path.parent.glob("plain-body-*.marshal"), key=lambda other: other.stat().st_mtime, reverse=True)
        for other in kept[KEPT_SCHEMAS:]:
            if other != path:
                other.unlink(missing_ok=True)
    except (OSError, UserError):  # unwritable, a folder in its place, the folder removed meanwhile
        pass


def kept_path() -> str | None:
    """Where the schema of these rules, this Python, this pydantic and this pydantic-core is kept; None where
    pydantic's version cannot be told (nothing is kept or taken then)."""
    import pydantic_core

    spec = importlib.util.find_spec("pydantic")  # its version file, read: pydantic itself is not imported
    version_file = os.path.join(os.path.dirname(spec.origin), "version.py") if spec and spec.origin else ""
    try:
        with open(version_file, "rb") as stream:
            pydantic_version = stream.read()
    except OSError:
        return None
    made_by = f"{stamp()}\n{sys.version}\npydantic-core {pydantic_core.__version__}\n".encode() + pydantic_version
    return os.path.join(kept_folder("schemas", None), f"plain-body-{hashlib.sha256(made_by).hexdigest()[:32]}.marshal")
