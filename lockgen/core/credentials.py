"""Credential scrubbing, the one rule for every URL that reaches a lock, an image, a certificate, an
SBOM or a log: no user info (`user:pass@`), no anaconda.org-style `/t/<token>` segment, and no
query values that look like secrets (`token=`, `key=`, `signature=`, ...)."""

from __future__ import annotations

import re
from urllib.parse import SplitResult, parse_qsl, unquote_plus, urlsplit, urlunsplit

_TOKEN_SEGMENT = re.compile(r"/t/[^/]+")
_SECRET_QUERY_KEYS = re.compile(r"(token|key|secret|signature|sig|password|passwd|auth|credential)", re.IGNORECASE)
# an http(s) URL of a bare host and a path of URL characters, no port, user info, query or fragment: how an index
# names a file. `urlsplit` would give it exactly as the groups do; a lock of 600k such URLs spent seconds there.
_PLAIN_URL = re.compile(r"(https?)://([A-Za-z0-9.-]+)(/[A-Za-z0-9._~!$&'()*+,;=:%/-]*)")


def split_url(url: str) -> SplitResult:
    """`urlsplit(url)`, taken from `url` as it is where it is a plain index URL (see `_PLAIN_URL`)."""
    plain = _PLAIN_URL.fullmatch(url)
    if plain is None:
        return urlsplit(url)
    return SplitResult(plain[1], plain[2], plain[3], "", "")


def plain_index_url(url: str) -> bool:
    """Whether `url` is a plain index URL without a `/t/` segment: nothing in it for `scrub_url` to take out (an
    http(s) URL of a bare host, no port, user info, query or fragment, its path of URL characters)."""
    return "/t/" not in url and _PLAIN_URL.fullmatch(url) is not None


def carries_credential(url: str) -> bool:
    """Whether `url` holds what `scrub_url` takes out: user info, an http(s) `/t/<token>` segment or a secret query
    value (a URL that does not parse counts as one: nothing can say it holds none). User info is looked for as
    rattler and uv read a URL (WHATWG): `https:alice:pw@host/` has it too, though Python's urlsplit sees no host."""
    if plain_index_url(url):
        return False
    try:
        parts = urlsplit(url)
    except ValueError:
        return True
    authority = (
        re.split(r"[/?#]", url[len(parts.scheme) + 1 :].lstrip("/\\"), maxsplit=1)[0] if parts.scheme else parts.netloc
    )
    token = parts.scheme in ("http", "https") and bool(_TOKEN_SEGMENT.search(parts.path))
    return (
        "@" in authority
        or token
        or any(_SECRET_QUERY_KEYS.search(key) for key, _ in parse_qsl(parts.query, keep_blank_values=True))
    )


def scrub_url(url: str) -> str:
    """`url` without credentials; anything that is not a URL with a scheme is returned unchanged. A URL that
    does not parse (`https://[host]/`: a bracketed host that is no IP address) loses anything between `//` and
    an `@`, and every `/t/<token>` segment."""
    if plain_index_url(url):
        return url
    try:
        parts = urlsplit(url)
    except ValueError:  # everything up to the last `@` before the path goes, and the query with it
        return _TOKEN_SEGMENT.sub("", re.sub(r"//[^/?#]*@", "//", url.split("?", 1)[0]))
    if not parts.scheme or (
        not parts.netloc and parts.scheme != "file"
    ):  # `https:alice:pw@host/`: user info all the same
        return re.sub(r"^([a-zA-Z][a-zA-Z0-9+.-]*:[/\\]*)[^/?#]*@", r"\1", url) if parts.scheme else url
    netloc = parts.netloc.rsplit("@", 1)[-1]
    path = _TOKEN_SEGMENT.sub("", parts.path) if parts.scheme in ("http", "https") else parts.path
    # a secret pair is dropped as it is written, the others kept byte for byte: decoding and encoding them again
    # changed URLs that hold no credential (`%2F`, `+`, and the `):` that free text puts after a URL)
    query = "&".join(
        pair for pair in parts.query.split("&") if not _SECRET_QUERY_KEYS.search(unquote_plus(pair.split("=", 1)[0]))
    )
    return urlunsplit((parts.scheme, netloc, path, query, parts.fragment))


def scrub_text(text: str) -> str:
    """Every URL inside free text (an error line from a tool, a log line) scrubbed."""
    return re.sub(r"[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>]+", lambda m: scrub_url(m.group(0)), text)
