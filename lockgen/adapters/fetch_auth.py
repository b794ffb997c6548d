"""Where the credentials for a fetch come from, never from a lock: the places rattler and uv read.

For a URL's host, in order: the JSON file `$RATTLER_AUTH_FILE` names (rattler's format: a host, or
`*.domain`, mapped to `{"BasicHTTP": {"username": …, "password": …}}`, `{"BearerToken": …}` or
`{"CondaToken": …}`), then `~/.netrc` (or the file `$NETRC` names). Resolving reads the same through
rattler's own middleware (which also reads the system keyring; lockgen's fetches do not), and uv reads
`~/.netrc` and its own settings for PyPI indexes. A credential written into a channel URL is scrubbed
from every lock, and goes out only on that run's own requests.
"""

from __future__ import annotations

import base64
import json
import netrc
import os
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from lockgen.adapters import user_files
from lockgen.core import nesting
from lockgen.errors import UserError


def _auth_file_entry(host: str) -> dict[str, Any] | None:
    path = os.environ.get("RATTLER_AUTH_FILE")
    if not path:
        return None
    try:
        entries = nesting.loads(user_files.read_bytes(path, user_files.STACK_LIMIT, "auth file").decode("utf-8"))
    except OSError as exc:
        raise UserError(
            f"cannot read RATTLER_AUTH_FILE `{path}`: {exc.strerror or type(exc).__name__}",
            "make the file readable, or unset RATTLER_AUTH_FILE",
        ) from None
    except nesting.TooDeepError as exc:
        raise UserError(
            f"cannot read RATTLER_AUTH_FILE `{path}`: it is {exc}",
            'it must be JSON: {"host": {"BasicHTTP": {"username": "...", "password": "..."}}}',
        ) from None
    except ValueError as exc:  # JSON's and UTF-8's messages give a position, never the text around it
        where = f"line {exc.lineno}" if isinstance(exc, json.JSONDecodeError) else "its encoding (not UTF-8)"
        raise UserError(
            f"cannot read RATTLER_AUTH_FILE `{path}`: it does not parse at {where}",
            'it must be JSON: {"host": {"BasicHTTP": {"username": "...", "password": "..."}}}',
        ) from None
    if not isinstance(entries, dict):
        raise UserError(f"RATTLER_AUTH_FILE `{path}` is not a JSON object", "map each host to its credential")
    if host in entries:
        return entries[host]
    for pattern, entry in entries.items():  # "*.example.org" covers every subdomain
        if isinstance(pattern, str) and pattern.startswith("*.") and host.endswith(pattern[1:]):
            return entry
    return None


def _netrc_pair(host: str) -> tuple[str, str] | None:
    path = os.environ.get("NETRC") or str(Path.home() / ".netrc")
    if not os.path.isfile(path):
        return None
    try:
        found = netrc.netrc(path).authenticators(host)
    except OSError as exc:
        raise UserError(
            f"cannot read {path}: {exc.strerror or type(exc).__name__}", "make the netrc file readable, or unset NETRC"
        ) from None
    except netrc.NetrcParseError as exc:  # its message quotes the token it stopped at, which may be a password
        raise UserError(
            f"cannot read {path}: it does not parse at line {exc.lineno}",
            "fix the netrc file (machine HOST login USER password PASS)",
        ) from None
    return (found[0], found[2] or "") if found else None


def authorized(url: str) -> tuple[str, dict[str, str]]:
    """The URL to request (a conda token goes into its path as `/t/<token>/`) and the headers that carry the
    host's credential, if any source has one; a URL that already names a user or token is left as it is."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.scheme not in ("http", "https") or not host or parts.username is not None or "/t/" in parts.path:
        return url, {}
    entry = _auth_file_entry(host)
    if isinstance(entry, dict):
        if isinstance(entry.get("BasicHTTP"), dict):
            basic = entry["BasicHTTP"]
            return url, {"Authorization": _basic(str(basic.get("username", "")), str(basic.get("password", "")))}
        if isinstance(entry.get("BearerToken"), str):
            return url, {"Authorization": f"Bearer {entry['BearerToken']}"}
        if isinstance(entry.get("CondaToken"), str):
            return urlunsplit(parts._replace(path=f"/t/{entry['CondaToken']}{parts.path}")), {}
    pair = _netrc_pair(host)
    return (url, {"Authorization": _basic(*pair)}) if pair else (url, {})


def authorized_request(url: str, headers: dict[str, str] | None = None) -> urllib.request.Request:
    """A GET of `url` with the caller's headers and the host's credential (a conda token in the path, or an
    Authorization header sent to this host only, never on to a redirect's)."""
    target, credential = authorized(url)
    request = urllib.request.Request(target, headers=headers or {})
    for name, value in credential.items():
        request.add_unredirected_header(name, value)
    return request


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
