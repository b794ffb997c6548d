"""A loopback HTTP server for wheel and index tests: byte ranges (`bytes=a-b`, `a-`, `-n`), a switch to ignore
them, PEP 691 JSON pages chosen by `Accept`, optional Basic auth, and a log of every request."""

from __future__ import annotations

import base64
import http.server
import re
import threading
from dataclasses import dataclass, field

_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


@dataclass
class Site:
    files: dict[str, tuple[bytes, str]] = field(default_factory=dict)  # path -> (body, content type)
    ignore_range: bool = False
    auth: str | None = None  # "user:pass" the server demands
    log: list[tuple[str, str | None, str | None]] = field(default_factory=list)  # (path, range, authorization)


def _handler(site: Site) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *_: object) -> None:
            pass

        def do_GET(self) -> None:
            site.log.append((self.path, self.headers.get("Range"), self.headers.get("Authorization")))
            wanted = "Basic " + base64.b64encode(site.auth.encode()).decode() if site.auth else None
            if wanted and self.headers.get("Authorization") != wanted:
                return self._send(401, b"", "text/plain")
            if self.path not in site.files:
                return self._send(404, b"", "text/plain")
            body, kind = site.files[self.path]
            found = _RANGE.match(self.headers.get("Range") or "")
            if site.ignore_range or not found or not (found[1] or found[2]):
                return self._send(200, body, kind)
            if found[1]:
                start, end = int(found[1]), min(len(body) - 1, int(found[2]) if found[2] else len(body) - 1)
            else:
                start, end = max(0, len(body) - int(found[2])), len(body) - 1
            if start > end:
                return self._send(416, b"", "text/plain", {"Content-Range": f"bytes */{len(body)}"})
            self._send(206, body[start : end + 1], kind, {"Content-Range": f"bytes {start}-{end}/{len(body)}"})

        def do_HEAD(self) -> None:
            site.log.append((self.path, "HEAD", self.headers.get("Authorization")))
            if self.path not in site.files:
                return self._send(404, b"", "text/plain", with_body=False)
            body, kind = site.files[self.path]
            self._send(200, body, kind, {"Accept-Ranges": "bytes"}, with_body=False)

        def _send(
            self, status: int, body: bytes, kind: str, extra: dict[str, str] | None = None, with_body: bool = True
        ) -> None:
            self.send_response(status)
            for key, value in {"Content-Type": kind, "Content-Length": str(len(body)), **(extra or {})}.items():
                self.send_header(key, value)
            self.end_headers()
            if with_body:
                self.wfile.write(body)

    return Handler


class RangeServer:
    """Serves a `Site` on 127.0.0.1 on a free port until `stop()`."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(site))
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)
