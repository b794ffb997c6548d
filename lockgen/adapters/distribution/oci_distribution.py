"""A minimal OCI distribution-spec client on the standard library (urllib), for what skopeo has no command
for: the referrers API, the `OCI-Subject` answer to a manifest with a `subject`, the fallback tag's index,
and the blobs of a shallow layout (`export --base docker://…`), which skopeo cannot push. It reads manifests
and blobs (checked against their digests, size-bounded, or streamed and hashed on the way), uploads blobs
(POST, then one monolithic PUT, from bytes or a stream), mounts them across repositories, and puts
manifests by digest or tag, byte for byte.

Credentials come from `registry_auth` and go out only after the registry's 401 challenge, to that host
(never on to a redirect's): Basic, or a bearer token fetched from the challenge's realm (with the
credential only when the realm is https or the registry's own host). `insecure`: https without
certificate checks, falling back to plain HTTP (a loopback registry). URLs in messages are scrubbed.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from email.message import Message
from typing import IO

from lockgen.adapters.http_deadline import Deadline, max_download_bytes, too_large, transfer_deadline_s
from lockgen.adapters.distribution.registry_auth import credential
from lockgen.core.credentials import scrub_url
from lockgen.core.image.image_reference import ImageReference
from lockgen.errors import HostError, LockFormatError, UserError
from lockgen.model.oci import DOCKER_LIST_MEDIA_TYPE, DOCKER_MANIFEST_MEDIA_TYPE, INDEX_MEDIA_TYPE, MANIFEST_MEDIA_TYPE

MAX_DOCUMENT = 4 << 20  # a manifest or an index: the distribution-spec's 4 MB
MAX_BLOB = 64 << 20  # an envelope or an SBOM
MAX_REFERRER_PAGES = 32
DEADLINE_HINT = "the registry is too slow or keeps sending; check it and retry"
ACCEPT_MANIFESTS = ", ".join(
    (MANIFEST_MEDIA_TYPE, INDEX_MEDIA_TYPE, DOCKER_MANIFEST_MEDIA_TYPE, DOCKER_LIST_MEDIA_TYPE)
)
LOGIN_HINT = (
    "log in with `skopeo login HOST` (lockgen reads the containers auth files and ~/.docker/config.json), and check "
    "the reference"
)


@dataclass(frozen=True)
class Answer:
    status: int
    headers: Message
    body: bytes


def _challenge(header: str) -> tuple[str, dict[str, str]]:
    scheme, _, rest = header.strip().partition(" ")
    return scheme.lower(), dict(re.findall(r'(\w+)="([^"]*)"', rest))


class Registry:
    """One repository of one registry, as `reference` names it."""

    def __init__(self, reference: ImageReference, insecure: bool, timeout_s: float = 60) -> None:
        self.reference = reference
        self._insecure = insecure
        self._timeout_s = timeout_s
        self._scheme: str | None = None
        self._authorization: str | None = None
        self._context = ssl.create_default_context()
        if insecure:  # a self-signed loopback or lab registry, as skopeo's --tls-verify=false
            self._context.check_hostname = False
            self._context.verify_mode = ssl.CERT_NONE

    # -- the wire -------------------------------------------------------------------------------------
    def _base(self) -> str:
        if self._scheme is None:
            self._scheme = "https"
            if self._insecure:
                try:
                    self._open(
                        urllib.request.Request(f"https://{self.reference.host}/v2/"), 1 << 16
                    )  # any answer: https
                except (urllib.error.URLError, OSError, HostError):  # no TLS there (or none within the deadline)
                    self._scheme = "http"
        return f"{self._scheme}://{self.reference.host}/v2/{self.reference.repository}"

    def _open(self, request: urllib.request.Request, limit: int, seconds: float | None = None) -> Answer:
        """The answer to one request, of any status, read whole within `seconds` (default: the client's timeout)."""
        url = request.full_url
        with Deadline(seconds or self._timeout_s, f"{request.get_method()} {scrub_url(url)}", DEADLINE_HINT) as clock:
            try:
                with clock.open(request, self._timeout_s, self._context) as response:
                    return Answer(response.status, response.headers, _bounded(response, limit, url))
            except urllib.error.HTTPError as error:
                return Answer(error.code, error.headers, _bounded(error, 1 << 16, url))

    def _send(
        self,
        method: str,
        url: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        limit: int = MAX_DOCUMENT,
        challenged: bool = False,
        seconds: float | None = None,
    ) -> Answer:
        """One request, sent once more after a 401 challenge the credentials can meet; any status returned."""
        request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
        if self._authorization:
            request.add_unredirected_header("Authorization", self._authorization)
        try:
            answer = self._open(request, limit, seconds)
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise HostError(
                f"cannot reach the registry at {scrub_url(url)}: {reason}",
                "check the host and port, and pass --insecure for a plain-HTTP registry",
            ) from None
        if answer.status == 401 and not challenged and self._authorize(answer.headers.get("WWW-Authenticate", "")):
            return self._send(method, url, body, headers, limit, True, seconds)
        return answer

    def _authorize(self, header: str) -> bool:
        """Meets a challenge with this host's credential (Basic) or a token from its realm; False if it cannot."""
        scheme, params = _challenge(header)
        pair = credential(self.reference.host, self.reference.repository)
        if scheme == "basic":
            if pair is None:
                return False
            self._authorization = "Basic " + base64.b64encode(f"{pair[0]}:{pair[1]}".encode()).decode()
            return True
        if scheme != "bearer" or not params.get("realm"):
            return False
        realm = urllib.parse.urlsplit(params["realm"])
        query = urllib.parse.urlencode({k: v for k, v in params.items() if k in ("service", "scope")})
        request = urllib.request.Request(urllib.parse.urlunsplit(realm._replace(query=query)))
        if pair is not None and (realm.scheme == "https" or realm.netloc == self.reference.host):
            request.add_unredirected_header(
                "Authorization", "Basic " + base64.b64encode(f"{pair[0]}:{pair[1]}".encode()).decode()
            )
        try:
            answer = self._open(request, 1 << 20)
            document = json.loads(answer.body) if answer.status == 200 else None
        except (urllib.error.URLError, OSError, ValueError):
            return False
        token = (document.get("token") or document.get("access_token")) if isinstance(document, dict) else None
        if not isinstance(token, str) or not token:
            return False
        self._authorization = f"Bearer {token}"
        return True

    def _refused(self, what: str, answer: Answer) -> HostError:
        try:
            codes = [e.get("code") for e in json.loads(answer.body).get("errors", []) if isinstance(e, dict)]
        except (ValueError, AttributeError):
            codes = []
        named = f" ({', '.join(str(c) for c in codes)})" if codes else ""
        hint = (
            LOGIN_HINT
            if answer.status in (401, 403)
            else "check the reference and that the registry accepts OCI 1.1 artifacts"
        )
        return HostError(
            f"{what}: {self.reference.host} answered {answer.status}{named}", hint.replace("HOST", self.reference.host)
        )

    # -- manifests and blobs ---------------------------------------------------------------------------
    def manifest(self, reference: str) -> tuple[bytes, str] | None:
        """(bytes, media type) of the manifest at a tag or digest, None when there is none; by digest, checked."""
        answer = self._send("GET", f"{self._base()}/manifests/{reference}", headers={"Accept": ACCEPT_MANIFESTS})
        if answer.status == 404:
            return None
        if answer.status != 200:
            raise self._refused(f"reading the manifest {self.reference.name}:{reference}", answer)
        if reference.startswith("sha256:") and "sha256:" + hashlib.sha256(answer.body).hexdigest() != reference:
            raise LockFormatError(
                f"the registry served other bytes for manifest {reference}",
                "the registry or something between is altering content; use another",
            )
        media_type = (answer.headers.get("Content-Type") or "").split(";")[0].strip()
        try:
            stated = json.loads(answer.body).get("mediaType")
        except (ValueError, AttributeError):
            stated = None
        return answer.body, stated or media_type

    def blob(self, digest: str, limit: int = MAX_BLOB) -> bytes:
        answer = self._send("GET", f"{self._base()}/blobs/{digest}", limit=limit)
        if answer.status != 200:
            raise self._refused(f"reading blob {digest[:19]}…", answer)
        if "sha256:" + hashlib.sha256(answer.body).hexdigest() != digest:
            raise LockFormatError(
                f"the registry served other bytes for blob {digest}",
                "the registry or something between is altering content; use another",
            )
        return answer.body

    def push_blob(self, data: bytes) -> None:
        """Uploads `data` unless the repository has it (as `push_blob_stream`, from memory)."""
        self.push_blob_stream("sha256:" + hashlib.sha256(data).hexdigest(), len(data), io.BytesIO(data))

    def has_blob(self, digest: str) -> bool:
        return self._send("HEAD", f"{self._base()}/blobs/{digest}").status == 200

    def mount_blob(self, digest: str, source_repository: str) -> bool:
        """Cross-repository blob mount (distribution-spec: `POST /v2/<name>/blobs/uploads/?mount=&from=`): True
        when the registry linked the blob (201); False when it opened an upload instead (202), which is cancelled."""
        query = urllib.parse.urlencode({"mount": digest, "from": source_repository})
        answer = self._send("POST", f"{self._base()}/blobs/uploads/?{query}", b"", {"Content-Length": "0"})
        if answer.status == 201:
            return True
        if answer.status == 202 and answer.headers.get("Location"):
            self._send("DELETE", urllib.parse.urljoin(self._base() + "/", answer.headers["Location"]))
            return False
        raise self._refused(f"mounting blob {digest[:19]}… from {source_repository}", answer)

    def push_blob_stream(self, digest: str, size: int, stream: IO[bytes] | io.RawIOBase) -> None:
        """Uploads `size` bytes read from `stream` (never held whole) as blob `digest` unless the repository has
        it; the registry checks the digest as it closes the upload. The POST meets any challenge first, as a
        stream cannot be sent twice."""
        if self.has_blob(digest):
            return
        opened = self._send("POST", f"{self._base()}/blobs/uploads/", b"", {"Content-Length": "0"})
        location = opened.headers.get("Location")
        if opened.status != 202 or not location:
            raise self._refused("opening a blob upload", opened)
        target = urllib.parse.urljoin(self._base() + "/", location)
        target += ("&" if "?" in target else "?") + urllib.parse.urlencode({"digest": digest})
        closed = self._send(
            "PUT",
            target,
            stream,  # type: ignore[arg-type]
            {
                "Content-Type": "application/octet-stream",
                "Content-Length": str(size),
            },
            challenged=True,
            seconds=transfer_deadline_s(),
        )
        if closed.status != 201:
            raise self._refused(f"uploading blob {digest[:19]}…", closed)

    @contextmanager
    def blob_stream(self, digest: str) -> Iterator["CheckedStream"]:
        """The blob's bytes as a stream, read as the caller reads (bounded memory); `verify()` at its end."""
        url = f"{self._base()}/blobs/{digest}"
        with Deadline(
            transfer_deadline_s(), f"reading blob {digest[:19]}… from {scrub_url(url)}", DEADLINE_HINT
        ) as clock:
            for challenged in (False, True):
                request = urllib.request.Request(url)
                if self._authorization:
                    request.add_unredirected_header("Authorization", self._authorization)
                try:
                    response = clock.open(request, self._timeout_s, self._context)
                    break
                except urllib.error.HTTPError as error:
                    answer = Answer(error.code, error.headers, _bounded(error, 1 << 16, url))
                    if (
                        error.code == 401
                        and not challenged
                        and self._authorize(answer.headers.get("WWW-Authenticate", ""))
                    ):
                        continue
                    raise self._refused(f"reading blob {digest[:19]}…", answer) from None
                except (urllib.error.URLError, OSError) as error:
                    raise HostError(
                        f"cannot reach the registry at {scrub_url(url)}: {getattr(error, 'reason', error)}",
                        "check the host and port, and pass --insecure for a plain-HTTP registry",
                    ) from None
            with response:
                yield CheckedStream(response, digest, max_download_bytes())

    def push_manifest(self, reference: str, data: bytes, media_type: str) -> str | None:
        """Puts a manifest at a digest or tag; returns the `OCI-Subject` header (the referrers API took its subject)."""
        answer = self._send("PUT", f"{self._base()}/manifests/{reference}", data, {"Content-Type": media_type})
        if answer.status != 201:
            raise self._refused(f"pushing manifest {self.reference.name}:{reference}", answer)
        return answer.headers.get("OCI-Subject")

    def referrers(self, digest: str) -> dict | None:
        """The referrers API's index of `digest` (every page), or None where the registry has no such API (404)."""
        url, manifests, index = f"{self._base()}/referrers/{digest}", [], None
        for _ in range(MAX_REFERRER_PAGES):
            answer = self._send("GET", url, headers={"Accept": INDEX_MEDIA_TYPE})
            if answer.status == 404 and index is None:
                return None
            if answer.status != 200:
                raise self._refused(f"listing the referrers of {digest[:19]}…", answer)
            try:
                index = json.loads(answer.body)
                manifests += index["manifests"]
            except (ValueError, TypeError, KeyError):
                raise LockFormatError(
                    "the registry's referrers answer is not an image index",
                    "the registry does not follow the distribution-spec; use another",
                ) from None
            following = re.search(r'<([^>]+)>;\s*rel="?next"?', answer.headers.get("Link") or "")
            if not following:
                return {**index, "manifests": manifests}
            url = urllib.parse.urljoin(url, following.group(1))
        raise HostError(
            f"the referrers of {digest[:19]}… run past {MAX_REFERRER_PAGES} pages",
            "the registry keeps answering `Link: next`; report it to its operator",
        )


class CheckedStream(io.RawIOBase):
    """A blob's bytes as they arrive, hashed on the way: `verify()` reads what is left and refuses other bytes."""

    def __init__(self, raw: IO[bytes], digest: str, limit: int) -> None:
        self._raw, self._digest, self._hasher, self.read_bytes, self._limit = raw, digest, hashlib.sha256(), 0, limit

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self._raw.read(min(len(buffer), 1 << 20))
        self._hasher.update(data)
        self.read_bytes += len(data)
        if self.read_bytes > self._limit:
            raise too_large(f"reading blob {self._digest[:19]}…", self._limit)
        buffer[: len(data)] = data
        return len(data)

    def verify(self) -> None:
        for _ in iter(lambda: self.read(1 << 20), b""):
            pass
        if "sha256:" + self._hasher.hexdigest() != self._digest:
            raise LockFormatError(
                f"the registry served other bytes for blob {self._digest}",
                "the registry or something between is altering content; use another",
            )


def _bounded(response, limit: int, url: str) -> bytes:
    data = response.read(limit + 1)
    if len(data) > limit:
        raise UserError(
            f"{scrub_url(url)} answered more than {limit >> 20} MiB", "this is not an attestation lockgen wrote"
        )
    return data
