"""A loopback proxy that answers the lock's own wheel URLs from files already verified against the lock's sha256, so
uv installs a lock's wheels with no network (`lockgen unpack`) exactly as it does from the index: same URLs, so the
same `direct_url.json` and RECORD, and the same environment digest as `lockgen materialize`.

uv keeps no public way to put a wheel into its cache under a URL (its cache layout is internal and versioned), so
unpack runs the normal install with uv's traffic routed here (`HTTP(S)_PROXY`, `NO_PROXY` cleared, for the duration
of `serving` in this process and the processes it starts). Plain `http://` URLs arrive as proxy requests; `https://`
ones as CONNECT tunnels, answered with TLS under a certificate authority made for this run alone (an EC P-256 key that
never leaves memory and the run's 0700 folder, removed after; `SSL_CERT_FILE` names it, so uv trusts that one
authority and no other while it runs). Only the URLs given are served (GET and HEAD, the whole file); any other request
gets 404, so nothing is fetched that the archive does not hold. Integrity does not rest on the TLS: every file served
was hashed against the lock, and uv checks it again (`--require-hashes`). It listens on 127.0.0.1 only, for as long as
the install runs; the wheels it serves are the public files the lock names.
"""

from __future__ import annotations

import contextlib
import datetime
import http.server
import os
import shutil
import ssl
import tempfile
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from urllib.parse import unquote, urlsplit

from lockgen.errors import HostError

_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
_DEFAULT_PORTS = {"http": 80, "https": 443}


def url_key(url: str) -> str:
    """A URL as it is matched: scheme and host lower-cased, the default port dropped, the path unquoted."""
    parts = urlsplit(url)
    port = parts.port if parts.port not in (None, _DEFAULT_PORTS.get(parts.scheme.lower())) else None
    host = (parts.hostname or "") + (f":{port}" if port else "")
    return f"{parts.scheme.lower()}://{host}{unquote(parts.path)}"


class _Authority:
    """This run's certificate authority, and a TLS context per host it signs for."""

    def __init__(self, folder: Path) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        self._folder, self._lock = folder, threading.Lock()
        self._contexts: dict[str, ssl.SSLContext] = {}
        self._key = ec.generate_private_key(ec.SECP256R1())
        self._name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "lockgen unpack (this run only)")])
        start = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=1)
        self._window = (start, start + datetime.timedelta(days=2))
        certificate = (
            self._builder(self._name, self._key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        self.pem = certificate.public_bytes(serialization.Encoding.PEM)
        self.bundle = folder / "authority.pem"
        self.bundle.write_bytes(self.pem)

    def _builder(self, subject, public_key):
        from cryptography import x509

        return (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self._name)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(self._window[0])
            .not_valid_after(self._window[1])
        )

    def context(self, host: str) -> ssl.SSLContext:
        """A server context presenting a certificate for `host`, signed by this authority (made once per host)."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        with self._lock:
            if host not in self._contexts:
                key = ec.generate_private_key(ec.SECP256R1())
                certificate = (
                    self._builder(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host[:64])]), key.public_key())
                    .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
                    .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                    .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
                    .add_extension(
                        x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()), critical=False
                    )
                    .sign(self._key, hashes.SHA256())
                )
                chain = self._folder / f"host-{len(self._contexts)}.pem"
                chain.write_bytes(
                    key.private_bytes(
                        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
                    )
                    + certificate.public_bytes(serialization.Encoding.PEM)
                    + self.pem
                )
                context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                context.load_cert_chain(chain)
                chain.unlink()
                self._contexts[host] = context
            return self._contexts[host]


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    _tunnel = ""  # "https://host[:port]" once a CONNECT tunnel is open

    def log_message(self, *_: object) -> None:
        pass

    def do_CONNECT(self) -> None:
        host, _, port = self.path.rpartition(":")
        if not host or not port.isdigit():
            self.send_error(400)
            return
        self.send_response(200, "Connection established")
        self.end_headers()
        self.wfile.flush()
        try:
            tls = self.server.authority.context(host.strip("[]")).wrap_socket(self.connection, server_side=True)
        except (ssl.SSLError, OSError):
            self.close_connection = True
            return
        self.connection, self.rfile, self.wfile = tls, tls.makefile("rb"), tls.makefile("wb")
        self._tunnel = url_key(f"https://{host}:{port}")
        self.close_connection = False

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def do_GET(self) -> None:
        self._answer(body=True)

    def _answer(self, body: bool) -> None:
        url = self._tunnel + urlsplit(self.path).path if self._tunnel else self.path
        path = self.server.files.get(url_key(url))
        if path is None:
            self.send_error(404, "not in the pack archive")
            return
        size = path.stat().st_size
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(size))
        self.end_headers()
        if body:
            with path.open("rb") as source:
                shutil.copyfileobj(source, self.wfile, 1 << 20)
        self.wfile.flush()


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, files: dict[str, Path], authority: _Authority) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.files, self.authority = files, authority

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that went away mid-reply (uv retries on its own); nothing to report


@contextlib.contextmanager
def serving(files: Mapping[str, Path]) -> Iterator[None]:
    """While inside: the URLs `files` names (lock URL -> verified file) are served to uv, and every HTTP(S) request
    of this process's children goes through the mirror (the variables are restored after)."""
    folder = Path(tempfile.mkdtemp(prefix="lockgen-mirror-"))
    saved = {name: os.environ.get(name) for name in (*_PROXY_VARIABLES, "NO_PROXY", "no_proxy", "SSL_CERT_FILE")}
    server = None
    try:
        authority = _Authority(folder)
        try:
            server = _Server({url_key(url): path for url, path in files.items()}, authority)
        except OSError as exc:
            raise HostError(
                f"cannot listen on 127.0.0.1 to hand the archive's wheels to uv: {exc.strerror or exc}",
                "bring the loopback interface up (in a network namespace: ip link set lo up)",
            ) from None
        threading.Thread(target=server.serve_forever, name="lockgen-wheel-mirror", daemon=True).start()
        address = f"http://127.0.0.1:{server.server_address[1]}"
        os.environ.update(
            {
                **dict.fromkeys(_PROXY_VARIABLES, address),
                "NO_PROXY": "",
                "no_proxy": "",
                "SSL_CERT_FILE": str(authority.bundle),
            }
        )
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if server is not None:
            server.shutdown()
            server.server_close()
        shutil.rmtree(folder, ignore_errors=True)
