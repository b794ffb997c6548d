"""Ed25519 signing of certificates (the `cryptography` library), and of the DSSE envelopes that carry them as
attestations (over their PAE bytes). A key's id is the sha256 of its raw public key: certificates carry its first
16 hex digits, DSSE envelopes all 64.

A certificate file is always the canonical rendering of `{certificate, signature}` as `lockgen verify` writes it
(`render`: sorted keys, two-space indent, ASCII). What its signature is over comes in two forms:

- **the file's own bytes** (`"signed": "file-bytes"`, what `lockgen verify --key` writes, `signed_file`): the
  Ed25519 signature of the file's bytes from its first, `{` and the line `  "certificate": `, to the body's last,
  `}`, exactly as the file holds them. The rest of the file is a frame of fixed form: the signature object's own
  rendering (`"algorithm": "ed25519"`, a key id of 16 hex digits, `"signed": "file-bytes"`, the value in
  canonical base64 of 64 bytes) and `}` with a line break. A reader with a key (`framed`, `check_framed`) checks
  that frame by exact comparison, verifies the signature over the bytes before it, and reads the body from those
  bytes: nothing is parsed before the signature is checked, and nothing is rendered again, because the signer
  rendered the body. What it trusts: that the holder of the key signs only bodies it rendered (lockgen's
  `verify` signs what it renders); any other byte of the file (content, layout, a key id, the signature) fails
  the signature or the frame, so a file re-serialized or edited after signing is refused. The signed bytes
  begin `{` and a line break, which no canonical JSON (the other form's message) and no DSSE PAE (`DSSEv1 `)
  does: a signature of one form is never one of the other.
- **the body's canonical JSON** (`digests.canonical_json`, no `signed` field, `sign`): the form of the
  certificates written before; a reader (`verify_file`) re-renders the file to prove it canonical and checks the
  signature over the body encoded again. Every certificate of this form still verifies as it did.

Without a key, a file of either form is read by `verify_file`: proven canonical, its signature only well formed.

A fleet's folder holds thousands of certificates: a framed file is proven at the cost of its signature and one
validation of its body from its JSON text; one of the older form by `signed_and_canonical` with keys loaded once
and `rendered`, which makes `render`'s bytes in a third of the time (json's indenting encoder is its pure-Python
one); a certificate neither proves is left to the readers above, whose refusal names the reason.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from json.encoder import encode_basestring_ascii
from pathlib import Path
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lockgen.adapters import user_files
from lockgen.model.json_values import object_at, text_at
from lockgen.model.names import shown
from lockgen.core import nesting
from lockgen.digests import canonical_json
from lockgen.errors import LockFormatError, UserError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from lockgen.model.json_values import JsonObject


def render(document: JsonObject) -> str:
    """The file text of a certificate: sorted keys, two-space indent, ASCII, trailing newline."""
    return json.dumps(document, sort_keys=True, indent=2, ensure_ascii=True) + "\n"


def rendered(document: Any) -> str:
    """`render(document)`, byte for byte, for a document as `json.loads` returns it (dicts with text keys, lists,
    text, numbers, booleans, None); the tests hold it to `render` on any such document."""
    return _laid_out(_rendered(document, _NEWLINE)) + "\n"


def rendered_nested(value: Any, depth: int) -> str:
    """`json.dumps(value, indent=2, sort_keys=True)` with its lines after the first indented `depth` levels more,
    byte for byte: a value written inside another document one item at a time (`fleet status --json`'s rows)
    at the speed of `rendered`. A value that is not JSON (another type, a key not text) is a TypeError."""
    return _laid_out(_rendered(value, _NEWLINE + _LEVEL * depth))


# `_rendered` writes a key's `: ` as KEY_END and each level's indent as LEVEL: neither can be in its output
# otherwise (control characters are escaped), so one pass of C makes the file's text of it, and another the
# canonical JSON (no layout, `:` alone) that the signature is over, without encoding the document twice.
_KEY_END, _LEVEL = "\x00", "\x01"
_NEWLINE = "\n"
_LAYOUT = str.maketrans({_KEY_END: ": ", _LEVEL: "  "})
_COMPACT = bytes.maketrans(b"\x00", b":")


def _laid_out(marked: str) -> str:
    return marked.replace(_KEY_END, ": ").replace(_LEVEL, "  ")


def _compact(marked: str) -> bytes:
    return marked.encode("ascii").translate(_COMPACT, b"\n\x01")


def _float(value: float) -> str:
    return float.__repr__(value) if value - value == 0.0 else json.dumps(value)  # NaN, Infinity: json's own spelling


_SCALARS: dict[type, Callable[[Any], str]] = {
    str: encode_basestring_ascii,
    float: _float,
    int: int.__repr__,
    bool: {True: "true", False: "false"}.__getitem__,
    type(None): lambda _: "null",
}


def _rendered(value: Any, newline: str) -> str:
    kind = type(value)
    scalar = _SCALARS.get(kind)
    if scalar is not None:
        return scalar(value)
    inner = newline + _LEVEL
    if kind is dict:
        if not value:
            return "{}"
        scalars = _SCALARS
        return (
            "{"
            + inner
            + ("," + inner).join(
                [
                    encode_basestring_ascii(key)
                    + _KEY_END
                    + (scalars[type(item)](item) if type(item) in scalars else _rendered(item, inner))
                    for key, item in sorted(value.items())
                ]
            )
            + newline
            + "}"
        )
    if kind is list:
        if not value:
            return "[]"
        return "[" + inner + ("," + inner).join([_rendered(item, inner) for item in value]) + newline + "]"
    raise TypeError(f"{kind.__name__} is not JSON")


def public_keys(paths: Sequence[Path]) -> dict[str, Ed25519PublicKey]:
    """The public keys at `paths`, loaded once, by the key id a certificate's signature names."""
    loaded = [_load(path, private=False) for path in paths]
    return {key_id(key): key for key in loaded}


def signed_and_canonical(text: str, document: Any, keys: Mapping[str, Any]) -> bool:
    """Whether `text` (which parsed to `document`) is a certificate file `verify_file` accepts with the key its
    signature names, one of `keys` (none given: whether it is canonical, its signature, if any, well formed).
    False says only that this quick proof failed: `verify_file` then says why, or accepts what this cannot."""
    if (
        type(document) is not dict
        or type(document.get("certificate")) is not dict
        or not set(document) <= {"certificate", "signature"}
    ):
        return False
    signature = document.get("signature")
    indent = _NEWLINE + _LEVEL
    body = _rendered(document["certificate"], indent)
    marked = (
        "{"
        + indent
        + '"certificate"'
        + _KEY_END
        + body
        + ","
        + indent
        + '"signature"'
        + _KEY_END
        + _rendered(signature, indent)
        + "\n}"
    )
    if _laid_out(marked) + "\n" != text:
        return False
    if signature is None:
        return not keys
    if not _well_formed(signature, text):
        return False
    if not keys:
        return True
    key = keys.get(signature["key_id"])
    if key is None or "signed" in signature:  # a framed file with its key is proven by its frame (`framed`)
        return False
    from cryptography.exceptions import InvalidSignature

    try:
        key.verify(_signature_bytes(signature["value"]), _compact(body))
    except (InvalidSignature, ValueError, binascii.Error):
        return False
    return True


SIGNED_FILE_BYTES = "file-bytes"  # a signature's `signed`: over the file's own bytes (`model.certificate.Signature`)
FILE_HEAD = '{\n  "certificate": '  # a certificate file's first bytes, in either form
_HEAD = FILE_HEAD.encode("ascii")


def _frame(key: str, value: str) -> str:
    """What follows the body in a file signed over its own bytes: the signature object as `render` writes it."""
    return (
        ',\n  "signature": {\n    "algorithm": "ed25519",\n    "key_id": "'
        + key
        + '",\n    "signed": "'
        + SIGNED_FILE_BYTES
        + '",\n    "value": "'
        + value
        + '"\n  }\n}\n'
    )


# a key id is 16 hex digits (`key_id`); a signature 64 bytes, in canonical base64 (86 digits, the last one's
# unused bits zero, then `==`): a value spelled otherwise, decoding to the same bytes, is another file
_FRAME = re.compile(
    re.escape(_frame("KEY", "VALUE").encode("ascii"))
    .replace(b"KEY", rb"([0-9a-f]{16})")
    .replace(b"VALUE", rb"([A-Za-z0-9+/]{85}[AQgw]==)")
)
_FRAME_SIZE = len(_frame("0" * 16, "A" * 88))


@dataclass(frozen=True)
class FramedFile:
    """A certificate file signed over its own bytes, cut at its frame (`framed`): nothing in it verified yet."""

    key_id: str
    signature: bytes  # Ed25519's 64 bytes
    signed: bytes  # the file's bytes the signature is over: FILE_HEAD, then the body
    body: bytes  # the certificate body's JSON, as the file holds it

    def signature_json(self) -> JsonObject:
        """The file's signature object, as it reads."""
        return {
            "algorithm": "ed25519",
            "key_id": self.key_id,
            "signed": SIGNED_FILE_BYTES,
            "value": base64.b64encode(self.signature).decode("ascii"),
        }


def framed(data: bytes) -> FramedFile | None:
    """`data` cut at its frame, when it is a certificate file signed over its own bytes whose frame is exactly the
    one `signed_file` writes; None for any other bytes (the older form, unsigned, a frame changed by one byte)."""
    end = len(data) - _FRAME_SIZE
    if end <= len(_HEAD) or not data.startswith(_HEAD):
        return None
    matched = _FRAME.fullmatch(data, end)
    if matched is None:
        return None
    signed = data[:end]
    return FramedFile(matched[1].decode("ascii"), base64.b64decode(matched[2]), signed, signed[len(_HEAD) :])


def verifies(found: FramedFile, key: Ed25519PublicKey) -> bool:
    """Whether `found`'s signature is `key`'s over the bytes it covers."""
    from cryptography.exceptions import InvalidSignature

    try:
        key.verify(found.signature, found.signed)
    except InvalidSignature:
        return False
    return True


def check_framed(found: FramedFile, key: Ed25519PublicKey) -> None:
    """Refuses (in `verify_file`'s words) a framed file signed by another key than `key`, or whose signature does
    not verify over its bytes."""
    if found.key_id != key_id(key):
        raise _other_signer(found.key_id, key)
    if not verifies(found, key):
        raise _changed()


def signed_file(body: JsonObject, private_key_path: Path) -> str:
    """The file of a certificate signed over its own bytes: `render({"certificate": body, "signature": ...})` byte
    for byte, the signature of its bytes up to the body's end (`FILE_HEAD` and the body at one level's indent)."""
    key = _load(private_key_path, private=True)
    signed = FILE_HEAD + rendered_nested(body, 1)
    value = base64.b64encode(key.sign(signed.encode("ascii"))).decode("ascii")
    return signed + _frame(key_id(key.public_key()), value)


def public_key(path: Path) -> Ed25519PublicKey:
    """The Ed25519 public key at `path` (refused, saying why, when it is not one)."""
    loaded: Ed25519PublicKey = _load(path, private=False)
    return loaded


def keygen(path: Path) -> tuple[Path, Path]:
    """Writes a private key (PEM, mode 0600) at `path` and its public key at `path.pub`; neither file is
    ever overwritten (a lost private key cannot be made again), and neither is left without the other."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    pub = path.with_name(path.name + ".pub")
    for existing in (path, pub):
        if os.path.lexists(existing):
            raise _exists(existing)
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_new(path, private, 0o600)
    try:
        _write_new(pub, public, 0o644)
    except BaseException:
        path.unlink()
        raise
    return path, pub


def _exists(path: Path) -> UserError:
    return UserError(
        f"`{path}` already exists; keygen never overwrites a key",
        f"choose another --out, or move `{path}` aside deliberately",
    )


def _write_new(path: Path, data: bytes, mode: int) -> None:
    """Creates `path` with `data`, refusing (O_EXCL) a file made there since the check, and removing it if writing
    fails."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except FileExistsError:
        raise _exists(path) from None
    try:
        with os.fdopen(descriptor, "wb") as stream:
            stream.write(data)
    except BaseException:
        path.unlink(missing_ok=True)
        raise


def _load(path: Path, private: bool) -> Any:
    from cryptography.hazmat.primitives import serialization

    try:
        data = user_files.read_bytes(path, user_files.KEY_LIMIT, "key")
        key = serialization.load_pem_private_key(data, None) if private else serialization.load_pem_public_key(data)
    except (OSError, ValueError, TypeError) as exc:
        kind = "private" if private else "public"
        raise UserError(f"cannot read {kind} key `{path}`: {exc}", "make one with `lockgen keygen --out KEY`") from None
    from cryptography.hazmat.primitives.asymmetric import ed25519

    if not isinstance(
        key, (ed25519.Ed25519PrivateKey, ed25519.Ed25519PublicKey)
    ):  # RSA, EC: certificates are signed with Ed25519 alone
        raise UserError(
            f"key `{path}` is a "
            f"{type(key).__name__.removeprefix('_').replace('PublicKey', '').replace('PrivateKey', '')} key, not "
            "Ed25519",
            "make one with `lockgen keygen --out KEY`",
        )
    return key


def fingerprint(public_key: Any) -> str:
    """The sha256 (hex) of the raw public key."""
    from cryptography.hazmat.primitives import serialization

    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def key_id(public_key: Any) -> str:
    return fingerprint(public_key)[:16]


def sign_message(message: bytes, private_key_path: Path) -> tuple[str, bytes]:
    """(the key's fingerprint, the Ed25519 signature of `message`): deterministic for one key and message."""
    key = _load(private_key_path, private=True)
    return fingerprint(key.public_key()), key.sign(message)


def public_fingerprint(public_key_path: Path) -> str:
    return fingerprint(_load(public_key_path, private=False))


def verify_message(message: bytes, signature: bytes, public_key_path: Path) -> bool:
    """Whether `signature` is the public key's Ed25519 signature of `message`."""
    from cryptography.exceptions import InvalidSignature

    try:
        _load(public_key_path, private=False).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True


def require_signed_by(document: JsonObject, private_key_path: Path) -> None:
    """Refuses a signed certificate document unless its signature is the one `private_key_path` makes (an
    attestation re-signs a certificate: it must not lend one key's name to another key's certificate)."""
    key = _load(private_key_path, private=True).public_key()
    signed_by = object_at(document, "signature").get("key_id")
    if signed_by != key_id(key):
        raise LockFormatError(
            f"the certificate is signed by key {signed_by}, but `{private_key_path}` is key {key_id(key)}",
            "pass --key with the private key that signed the certificate",
        )
    _check_signature(document, key)


def sign(body: JsonObject, private_key_path: Path) -> JsonObject:
    """The signature object of the older form, over the body's canonical JSON: what `lockgen verify --key` wrote
    before `signed_file` (the tests and the benchmark make certificates of that form with it, which still verify)."""
    key = _load(private_key_path, private=True)
    return {
        "algorithm": "ed25519",
        "key_id": key_id(key.public_key()),
        "value": base64.b64encode(key.sign(canonical_json(body))).decode(),
    }


def verify_file(text: str, public_key_path: Path | None) -> JsonObject:
    """The parsed certificate document, after checking its bytes and (with a key) its signature."""
    try:
        document = nesting.loads(text)
    except nesting.TooDeepError as exc:
        raise LockFormatError(
            f"certificate is JSON {exc}", "it is not a certificate lockgen wrote; use the original file"
        ) from None
    except ValueError as exc:
        raise LockFormatError(f"certificate is not JSON: {exc}", "it was damaged; use the original file") from None
    if render(document) != text:
        raise LockFormatError(
            "certificate bytes differ from their canonical form: the file was edited",
            "certificates are tamper-evident; re-run lockgen verify",
        )
    if not isinstance(document, dict):
        raise LockFormatError("certificate is not a JSON object", "it was damaged; use the original file")
    signature = document.get("signature")
    if signature is not None and not _well_formed(signature, text):
        raise LockFormatError(
            "certificate signature is malformed (lockgen signs with ed25519: algorithm, key_id, value)",
            "the file was edited; use the original certificate",
        )
    if public_key_path is None:
        return document
    if not signature:
        raise LockFormatError("certificate is not signed", "sign with `lockgen verify --key KEY`")
    _check_signature(document, _load(public_key_path, private=False))
    return document


def check_signed(document: JsonObject, public_key_path: Path) -> None:
    """Refuses a certificate document `verify_file` read without a key (its file canonical, its signature well
    formed) unless the key at `public_key_path` signed it: what `verify_file` with that key checks beside, so a
    reader that chose the key by the signature's id does not prove the file canonical a second time."""
    _check_signature(document, _load(public_key_path, private=False))


def signer_public_key(private_key_path: Path) -> dict[str, Ed25519PublicKey]:
    """The public half of the private key at `private_key_path`, by its key id: what a certificate it signed names."""
    key = _load(private_key_path, private=True).public_key()
    return {key_id(key): key}


def check_signed_with(document: JsonObject, key: Ed25519PublicKey) -> None:
    """`check_signed` with the key loaded (a numerics reference's keys are loaded once, a signing key's public half
    among them)."""
    _check_signature(document, key)


def _check_signature(document: JsonObject, key: Ed25519PublicKey) -> None:
    """Refuses `document` (a canonical file's, its signature well formed: `verify_file`) unless `key` signed it,
    over what its form names: the file's bytes up to the body's end (rendered again: the file is canonical), or
    the body's canonical JSON."""
    from cryptography.exceptions import InvalidSignature

    signature = object_at(document, "signature")  # its form checked by `verify_file`
    if signature.get("key_id") != key_id(key):
        raise _other_signer(str(signature.get("key_id")), key)
    try:
        if signature.get("signed") == SIGNED_FILE_BYTES:
            message = (FILE_HEAD + rendered_nested(document["certificate"], 1)).encode("ascii")
        else:
            message = canonical_json(document["certificate"])
        key.verify(_signature_bytes(text_at(signature, "value") or ""), message)
    except (InvalidSignature, ValueError, KeyError):
        raise _changed() from None


def _well_formed(signature: object, text: str) -> bool:
    """Whether a canonical file's `signature` is one lockgen writes: Ed25519 with a key id and a value, and
    `signed`, when present, naming the file's bytes, with the file's frame then exactly `signed_file`'s."""
    if (
        type(signature) is not dict
        or signature.get("algorithm") != "ed25519"
        or type(signature.get("value")) is not str
        or type(signature.get("key_id")) is not str
    ):
        return False
    return "signed" not in signature or (
        signature["signed"] == SIGNED_FILE_BYTES and framed(text.encode("utf-8", "surrogatepass")) is not None
    )


def _signature_bytes(value: str) -> bytes:
    """The bytes of a signature's value, which must be canonical base64 (ValueError otherwise): `b64decode` alone
    skips characters outside the alphabet and unused bits, so a value with a byte changed could decode the same."""
    decoded = base64.b64decode(value, validate=True)
    if base64.b64encode(decoded).decode("ascii") != value:
        raise ValueError("not canonical base64")
    return decoded


def _other_signer(signed_by: str, key: Ed25519PublicKey) -> LockFormatError:
    return LockFormatError(
        f"certificate was signed by key {shown(signed_by)}, not {key_id(key)}",
        "pass the public key that matches the signing key",
    )


def _changed() -> LockFormatError:
    return LockFormatError(
        "certificate signature does not verify: its content was changed",
        "certificates are tamper-evident; re-run lockgen verify",
    )
