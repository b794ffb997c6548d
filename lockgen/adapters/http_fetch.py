"""One bounded HTTP GET for the PyPI adapters (index pages, wheel byte ranges), on the stdlib.

Bounded: a timeout per socket operation, a deadline for the whole reply (`http_deadline`: a server dripping
bytes is cut off), and a cap on the bytes read.
Credentials written into a URL as `user:pass@`, or found for its host in ~/.netrc or $RATTLER_AUTH_FILE
(`adapters.fetch_auth`), go out as an `Authorization` header that is not repeated on a redirect (urllib keeps
unredirected headers to the first host); a `/t/<token>/` path stays
in the request. Neither ever appears in a message: errors name the URL as `scrub_url` leaves it.
Each reply is counted (requests, body bytes) on the `Meter` the caller passes, so a use case can report
what a check cost.
"""

from __future__ import annotations

import base64
import http.client
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit, urlunsplit

from lockgen.adapters import fetch_auth
from lockgen.adapters.http_deadline import Deadline, too_large
from lockgen.core.credentials import scrub_url
from lockgen.model.names import shown
from lockgen.errors import ChannelError, NotFoundError, UserError

_BLOCK = 1 << 16


@dataclass
class Meter:
    """What a series of GETs cost: replies received and body bytes read (mutable: a running count)."""

    requests: int = 0
    bytes: int = 0


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes


def _request(url: str, headers: dict[str, str]) -> urllib.request.Request:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UserError(f"`{scrub_url(url)}` is not an http(s) URL", "give the index or file as https://...")
    if parts.username is not None:
        host = parts.netloc.rsplit("@", 1)[-1]
        request = urllib.request.Request(urlunsplit((parts.scheme, host, parts.path, parts.query, "")), headers=headers)
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
        request.add_unredirected_header("Authorization", "Basic " + base64.b64encode(pair).decode())
        return request
    return fetch_auth.authorized_request(url, headers)  # ~/.netrc or $RATTLER_AUTH_FILE, as uv and rattler read


ATTEMPTS = 3


class _Retryable(ChannelError):
    """A failure worth one more try: the network, or the server's 429/5xx."""


def get(url: str, headers: dict[str, str], meter: Meter, timeout_s: float = 30.0, limit: int = 64 << 20) -> Reply:
    """GET `url`; the reply's body, at most `limit` bytes, read within `timeout_s` each try. A network failure
    or a 429/5xx is tried again (three tries, 1 s then 2 s apart); other 4xx replies are UserErrors."""
    for attempt in range(ATTEMPTS):
        try:
            return _get_once(url, headers, meter, timeout_s, limit)
        except _Retryable as exc:
            if attempt == ATTEMPTS - 1:
                raise ChannelError(exc.message, exc.hint) from None
            time.sleep(1 << attempt)
    raise AssertionError("unreachable")


def _get_once(url: str, headers: dict[str, str], meter: Meter, timeout_s: float, limit: int) -> Reply:
    safe = scrub_url(url)
    request = _request(url, headers)
    with Deadline(timeout_s, f"GET {safe}", "retry on a faster link; is the URL right?") as clock:
        return _read(clock, request, safe, meter, timeout_s, limit)


def _read(
    clock: Deadline, request: urllib.request.Request, safe: str, meter: Meter, timeout_s: float, limit: int
) -> Reply:
    try:
        with clock.open(request, timeout_s) as response:
            meter.requests += 1
            chunks, size = [], 0
            while block := response.read(_BLOCK):
                size += len(block)
                meter.bytes += len(block)
                if size > limit:
                    raise too_large(f"GET {safe}", limit)
                chunks.append(block)
            return Reply(response.status, {k.lower(): v for k, v in response.headers.items()}, b"".join(chunks))
    except urllib.error.HTTPError as exc:
        meter.requests += 1
        kind = _Retryable if exc.code == 429 or exc.code >= 500 else NotFoundError if exc.code == 404 else UserError
        raise kind(f"GET {safe}: HTTP {exc.code} {exc.reason}", "check the URL and the index's credentials") from None
    except urllib.error.URLError as exc:
        raise _Retryable(f"GET {safe}: {exc.reason}", "check the network and the index URL") from None
    except (OSError, http.client.HTTPException) as exc:
        raise _Retryable(
            f"GET {safe}: {type(exc).__name__} {shown(str(exc))}", "check the network and the index URL"
        ) from None
    except ValueError:
        raise UserError(f"GET {safe}: not a valid URL", "check the URL") from None
