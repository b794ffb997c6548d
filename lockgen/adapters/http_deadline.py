"""Bounds on HTTP exchanges (urllib) in time and size.

A socket timeout bounds one silent wait, not a server that drips a byte every few seconds: `Deadline`
bounds the whole exchange. Its sockets are shut down when the time is up, wherever urllib is blocked
(reading the status line, the headers or the body), and leaving the `with` block then raises one
HostError naming the exchange, whatever error the shutdown caused inside it.

Transfers whose size nothing states (the lock has no size field) are capped at
`LOCKGEN_MAX_DOWNLOAD_BYTES` (default 8 GiB: above the largest file of a CUDA torch wheel set, 5 GB in
all), and one archive, layer or blob sent or received must finish within `LOCKGEN_TRANSFER_DEADLINE_S`
(default 3600 s). Smaller exchanges (index pages, manifests, registry calls) get their caller's deadline.
"""

from __future__ import annotations

import functools
import http.client
import math
import os
import socket
import ssl
import threading
import urllib.request
from types import TracebackType
from typing import Any, Callable, TypeVar

from lockgen.errors import HostError, UserError

MAX_DOWNLOAD_ENV = "LOCKGEN_MAX_DOWNLOAD_BYTES"
DEFAULT_MAX_DOWNLOAD = 8 << 30
TRANSFER_DEADLINE_ENV = "LOCKGEN_TRANSFER_DEADLINE_S"
DEFAULT_TRANSFER_DEADLINE_S = 3600.0

N = TypeVar("N", int, float)


def _positive(name: str, default: N, kind: Callable[[str], N]) -> N:
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = kind(text)
    except ValueError:
        value = kind("0")
    if not value > 0 or math.isinf(value):
        raise UserError(
            f"{name}={text[:40]!r} is not a positive number",
            f"set it to a positive number, or unset it for the default ({default})",
        )
    return value


def max_download_bytes() -> int:
    """The most bytes one download may bring (`LOCKGEN_MAX_DOWNLOAD_BYTES`)."""
    return _positive(MAX_DOWNLOAD_ENV, DEFAULT_MAX_DOWNLOAD, int)


def transfer_deadline_s() -> float:
    """The most seconds one archive, layer or blob may take to send or receive (`LOCKGEN_TRANSFER_DEADLINE_S`)."""
    return _positive(TRANSFER_DEADLINE_ENV, DEFAULT_TRANSFER_DEADLINE_S, float)


def too_large(what: str, limit: int) -> UserError:
    """The error of a reply past its size limit."""
    return UserError(
        f"{what}: the reply is larger than {limit} bytes, the most lockgen reads",
        f"check the URL; a larger file is allowed by raising {MAX_DOWNLOAD_ENV}",
    )


class Deadline:
    """`with Deadline(seconds, what, hint) as clock:` then `clock.open(request, timeout)` in it: every socket
    those requests open is shut down after `seconds`, and the block then raises a HostError."""

    def __init__(self, seconds: float, what: str, hint: str) -> None:
        self.seconds, self._what, self._hint = seconds, what, hint
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> "Deadline":
        self._timer.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._timer.cancel()
        if self.expired and (kind is None or issubclass(kind, Exception)):
            raise HostError(
                f"{self._what}: not finished within {self.seconds:g} s (the server is too slow, or keeps sending)",
                self._hint,
            ) from None

    def open(self, request: urllib.request.Request, timeout: float, context: ssl.SSLContext | None = None) -> Any:
        """`urllib.request.urlopen(request, timeout)`, its sockets (redirects' too) under this deadline."""
        opener = urllib.request.build_opener(_HTTPHandler(self), _HTTPSHandler(self, context))
        return opener.open(request, timeout=timeout)

    def track(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if not self.expired:
                return
        _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)


def _shut(sock: socket.socket) -> None:
    """Ends a socket's exchange from another thread: the blocked read returns; the plain socket's own shutdown,
    even of a TLS one (SSLSocket's would drop its TLS state under the reading thread)."""
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass  # already closed


class _Tracked:
    """A connection whose socket its deadline can shut (mixed into http.client's two connection classes)."""

    sock: socket.socket

    def __init__(self, *args: Any, deadline: Deadline, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline = deadline

    def connect(self) -> None:
        super().connect()  # type: ignore[misc]
        self._deadline.track(self.sock)


class _HTTPConnection(_Tracked, http.client.HTTPConnection):
    pass


class _HTTPSConnection(_Tracked, http.client.HTTPSConnection):
    pass


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: Deadline) -> None:
        super().__init__()
        self._deadline = deadline

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(functools.partial(_HTTPConnection, deadline=self._deadline), req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: Deadline, context: ssl.SSLContext | None) -> None:
        super().__init__(context=context)
        self._deadline = deadline

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        connection = functools.partial(_HTTPSConnection, deadline=self._deadline)
        # urllib keeps `_context` private
        return self.do_open(connection, req, context=self._context)  # type: ignore[attr-defined]
