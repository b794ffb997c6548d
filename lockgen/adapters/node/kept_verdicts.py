"""Certificate verdicts kept by bytes and key: a certificate's verdict under a public key is a function of its
file's bytes and that key alone, so what `fleet status` read of a certificate it accepted (its
`CertificateFacts`, as plain values) is kept under
`$LOCKGEN_HOME/kept/<lockgen version>-<SCHEMA>/certificates/<sha256[:2]>/<sha256 of the file's bytes>`, with the
fingerprint of the key that verified its signature ("" when no key was given: the file was only found
canonical, its signature, if any, well formed). A later status reads each file's bytes again, hashes them and
takes the kept facts; only a file whose bytes have no kept verdict under one of the keys given now is parsed
and verified.

What a kept verdict trusts: that the file under lockgen's home was written by lockgen, after this version of
lockgen proved exactly the bytes whose sha256 names it (canonical, signed by the key whose fingerprint it
records, its body accepted by the models) — the bytes are hashed on every run, so an edited, re-serialized or
re-signed file has another sha256 and is verified again, and refused as before. A verdict is kept only for
bytes the quick proof accepted as read (never for a refusal, which is made again each run and words its own
reason, nor for a file `read_signed` accepted by reading it a second time). A record is written whole (a
temporary file and a rename) or not at all and read back only when it names the same sha256, lockgen version,
rules (a digest of the sources of the models a certificate is accepted by: a verdict an older lockgen kept, which
accepted what this one refuses, is no verdict now) and schema, and one of the keys given; anything else reads as
not kept. Keeping is best-effort: a home lockgen
cannot write keeps nothing. `LOCKGEN_REPARSE=1`, or removing the `kept/` folder, verifies every certificate."""

from __future__ import annotations

import marshal
import os
from collections.abc import Collection
from typing import Any

from lockgen import __version__
from lockgen.adapters.proof.kept_runs import kept_folder, trusted

SCHEMA = 1  # the record's form: raised whenever what is kept, or what a reader takes from it, changes
RECORD_LIMIT = 1 << 20  # a record holds one certificate's figures and fingerprint: a few KiB
# the sources of what a certificate must be to be accepted (the schema and its models), from lockgen's folder
RULE_SOURCES = ("model/certificate.py", "model/json_values.py", "../verify/schema.py")
_stamp: list[str] = []


def stamp() -> str:
    """lockgen's version and the sha256 of the rules' sources: what a kept verdict was made under."""
    if not _stamp:
        import hashlib

        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        digest = hashlib.sha256()
        for source in RULE_SOURCES:
            try:
                with open(os.path.join(root, source), "rb") as stream:
                    digest.update(stream.read())
            except OSError:  # not installed beside lockgen: the rules cannot be told, so nothing kept is taken
                digest.update(os.urandom(16))
        _stamp.append(f"{__version__} rules {digest.hexdigest()[:16]}")
    return _stamp[0]


def _path(sha256: str) -> str:
    return os.path.join(kept_folder("certificates", SCHEMA), sha256[:2], sha256)


def kept_verdict(sha256: str, keys: Collection[str]) -> Any:
    """The value kept for the certificate bytes whose sha256 is `sha256`, verified under one of `keys` (key
    fingerprints; `{""}` when no key is given); None when none is kept (or kept values are off)."""
    if not trusted():
        return None
    try:
        descriptor = os.open(_path(sha256), os.O_RDONLY | os.O_CLOEXEC)
        try:  # read as one buffer of the record's size (a read of the cap allocates all of it: 1 MiB a record)
            data = os.read(descriptor, min(os.fstat(descriptor).st_size, RECORD_LIMIT))
        finally:
            os.close(descriptor)
        record = marshal.loads(data)
    except (OSError, EOFError, ValueError, TypeError):
        return None
    if (
        type(record) is not tuple
        or len(record) != 5
        or record[:3] != (sha256, stamp(), SCHEMA)
        or record[3] not in keys
    ):
        return None
    return record[4]


def keep_verdict(sha256: str, key: str, value: Any) -> None:
    """Keeps `value` (plain values marshal holds) for the certificate bytes whose sha256 is `sha256`, verified
    under the key whose fingerprint is `key` ("" for none)."""
    path = _path(sha256)
    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        data = marshal.dumps((sha256, stamp(), SCHEMA, key, value))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(temporary, "wb") as stream:
            stream.write(data)
        os.replace(temporary, path)
    except (OSError, ValueError):  # a home lockgen cannot write (read-only, full), a value marshal cannot hold
        try:
            os.unlink(temporary)
        except OSError:
            pass  # nothing was made
