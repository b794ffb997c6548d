"""A numerics fingerprint as plain values (pydantic-free, for the readers that import no models: a fleet's kept
verdicts, `fleet status`'s output): its key (`FingerprintKey`, `model.certificate.NumericsKey`'s fields in its
order) and digests; a certificate's `Numerics` model read into one (`fingerprint_of`), plain values read into one
by the model's rules (`plain_fingerprint`), and how a difference is said (`digests_text`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lockgen.model.certificate import Numerics

KEY_FIELDS = ("device", "driver", "environment_digest", "torch", "cuda", "cudnn", "cublas", "work")
_REQUIRED = frozenset({"device", "work"})  # the key's fields without a default (`model.certificate.NumericsKey`)


@dataclass(frozen=True, slots=True)
class FingerprintKey:
    """What must be equal for two nodes' fingerprints to be compared (`model.certificate.NumericsKey`'s fields, in
    its order): the device, the driver, the environment by digest, the versions of torch, CUDA, cuDNN and cuBLAS
    the process loaded, and the work that was digested."""

    device: str
    driver: str | None
    environment_digest: str | None
    torch: str | None
    cuda: str | None
    cudnn: str | None
    cublas: str | None
    work: str

    def as_json(self) -> dict[str, str | None]:
        """The key as the model writes it (`NumericsKey.model_dump()`): every field, in order."""
        return {name: getattr(self, name) for name in KEY_FIELDS}


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """The numerics fingerprint: the SHA-256 of each piece of deterministic work's output bits, under its key."""

    key: FingerprintKey
    digests: dict[str, str]

    def as_json(self) -> dict[str, Any]:
        """As the model writes it (`Numerics.model_dump()`)."""
        return {"key": self.key.as_json(), "digests": dict(self.digests)}


def fingerprint_of(numerics: Fingerprint | Numerics) -> Fingerprint:
    """A certificate's fingerprint (its `Numerics` model, or one already plain) as plain values."""
    if isinstance(numerics, Fingerprint):
        return numerics
    key = numerics.key
    return Fingerprint(FingerprintKey(*(getattr(key, name) for name in KEY_FIELDS)), dict(numerics.digests))


def plain_fingerprint(value: object) -> Fingerprint:
    """A fingerprint from plain values as the model's rules accept them (`Numerics.model_dump()`'s, or a body's
    `numerics` validated as plain values, where a field with a default may be absent): ValueError for anything else
    (a field unknown or missing, a value not text)."""
    if type(value) is not dict or set(value) != {"key", "digests"}:
        raise ValueError("a fingerprint is an object of a key and digests")
    key, digests = value["key"], value["digests"]
    if type(key) is not dict or not _REQUIRED <= set(key) or not set(key) <= set(KEY_FIELDS):
        raise ValueError("a fingerprint's key names the fields of NumericsKey")
    parts: list[Any] = [key.get(name) for name in KEY_FIELDS]
    if not all(type(part) is str or (part is None and name not in _REQUIRED) for name, part in zip(KEY_FIELDS, parts)):
        raise ValueError("a fingerprint's key holds text")
    if type(digests) is not dict or not all(type(k) is str and type(v) is str for k, v in digests.items()):
        raise ValueError("a fingerprint's digests are text by text")
    return Fingerprint(FingerprintKey(*parts), digests)


def digests_text(names: Sequence[str]) -> str:
    """`digest gemm_tf32 differs` or `digests gemm_tf32, conv_bf16 differ`: how the fingerprints' difference is said."""
    return f"digest {names[0]} differs" if len(names) == 1 else f"digests {', '.join(names)} differ"
