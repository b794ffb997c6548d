"""The certificate body's plain validation (`model.plain_certificate`) without pydantic's models: the validator's
core schema is kept as data (`plain_certificate.kept_form`, written by marshal) under lockgen's home, so a
status that must prove certificates builds its validator with pydantic-core alone (`SchemaValidator`, under a
millisecond) instead of importing pydantic and the models to derive it (about 0.15 s a process).

Where: `$LOCKGEN_HOME/kept/schemas/plain-body-<key>.marshal`, the key the sha256 of what made the schema: the
rules' sources (`kept_verdicts.stamp`: lockgen's version and the sha256 of the certificate's models, their base,
and the plain validation's sources), pydantic's version file and pydantic-core's version. Another lockgen,
another edit of a rule or another pydantic reads another file, so a kept schema is never one other rules made.

What it trusts: as a kept verdict does, that a file under lockgen's home was written by lockgen. The schema is
the one the models' plain validator is made from too (`plain_certificate.plain_body`), so kept or made, a body is
validated by one schema; a kept file that cannot be read, or that pydantic-core refuses, is made again and
written over. Keeping is best-effort: a home lockgen cannot write keeps nothing. `LOCKGEN_REPARSE=1` makes the
schema from the models every time."""

from __future__ import annotations

import hashlib
import importlib.util
import marshal
import os
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lockgen.adapters.atomic_files import write_bytes_atomic
from lockgen.adapters.node.kept_verdicts import stamp
from lockgen.adapters.proof.kept_runs import kept_folder, trusted

if TYPE_CHECKING:
    from pydantic_core import SchemaValidator


def plain_body(text: bytes) -> dict[str, Any]:
    """`model.plain_certificate.plain_body(text)`, by the validator made from the kept schema: the body as plain
    values, or `pydantic_core.ValidationError` (pydantic's) when the validation refuses it."""
    body: dict[str, Any] = plain_validator().validate_json(text)
    return body


@lru_cache(maxsize=1)
def plain_validator() -> SchemaValidator:
    """The plain validator: made from the kept schema when one is kept for these rules, else from the models (and
    the schema kept for the next process)."""
    from pydantic_core import SchemaError, SchemaValidator

    path = kept_path()
    if trusted():
        try:
            with open(path, "rb") as stream:
                return SchemaValidator(marshal.loads(stream.read()))
        except (OSError, ValueError, EOFError, TypeError, SchemaError):  # none kept, or not one to take
            pass
    from lockgen.model.plain_certificate import kept_form

    schema = kept_form()
    validator = SchemaValidator(schema)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_bytes_atomic(Path(path), marshal.dumps(schema))
    except OSError:
        pass
    return validator


def kept_path() -> str:
    """Where the schema of these rules, this pydantic and this pydantic-core is kept."""
    import pydantic_core

    digest = hashlib.sha256(f"{stamp()}\npydantic-core {pydantic_core.__version__}\n".encode())
    spec = importlib.util.find_spec("pydantic")  # its version file, read: pydantic itself is not imported
    version_file = os.path.join(os.path.dirname(spec.origin), "version.py") if spec and spec.origin else ""
    try:
        with open(version_file, "rb") as stream:
            digest.update(stream.read())
    except OSError:  # pydantic's version cannot be told: nothing kept can be taken for it
        digest.update(os.urandom(16))
    return os.path.join(kept_folder("schemas", None), f"plain-body-{digest.hexdigest()[:32]}.marshal")
