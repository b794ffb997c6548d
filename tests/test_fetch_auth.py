"""A private channel behind Basic auth on loopback: resolve and materialize take the credential from
~/.netrc or $RATTLER_AUTH_FILE, it never reaches the lock, the store, a log or an error, and a missing
one is a 401 with a hint that says where credentials go."""

from __future__ import annotations

import base64
import functools
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from lockgen.adapters import fetch_auth
from lockgen.api.materialize import materialize
from lockgen.errors import ChannelError, UserError
from tests.channel_factory import Pkg, build_channel, cpu_lock
from tests.conftest import run_cli

USER, PASSWORD = "alice", "s3cr3tPW"


class _AuthHandler(http.server.SimpleHTTPRequestHandler):
    seen: list[str | None]

    def log_message(self, *_: object) -> None:
        pass

    def do_GET(self) -> None:
        self.seen.append(self.headers.get("Authorization"))
        if self.headers.get("Authorization") != "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode():
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="private"')
            self.end_headers()
            return
        super().do_GET()


@pytest.fixture
def private_channel(tmp_path: Path) -> Iterator[tuple[str, list]]:
    """(URL, the Authorization headers the server saw) of a channel that demands Basic auth."""
    channel = build_channel(tmp_path / "channel", [Pkg("libfoo", "1.0", files={"lib/libfoo.txt": "foo\n"})])
    seen: list[str | None] = []
    handler = type("Handler", (_AuthHandler,), {"seen": seen})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(channel)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()


@pytest.fixture
def user_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "user"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "lockgen-home"))
    monkeypatch.delenv("RATTLER_AUTH_FILE", raising=False)
    monkeypatch.delenv("NETRC", raising=False)
    return home


def _made(tmp_path: Path) -> Path:
    (tmp_path / "made").mkdir()
    return tmp_path / "made"


def _everything_written(*roots: Path) -> str:
    return "".join(
        p.read_bytes().decode("utf-8", "replace")
        for root in roots
        for p in root.rglob("*")
        if p.is_file() and p.stat().st_size < 1 << 20
    )


@pytest.mark.slow
def test_netrc_credentials_resolve_and_materialize_and_stay_out_of_everything(
    tmp_path: Path, private_channel: tuple[str, list], user_home: Path
) -> None:
    url, seen = private_channel
    netrc_file = user_home / ".netrc"
    netrc_file.write_text(f"machine 127.0.0.1 login {USER} password {PASSWORD}\n")
    netrc_file.chmod(0o600)
    lock = cpu_lock(_made(tmp_path), url, ["libfoo"])
    prefix, _ = materialize(lock, None, tmp_path / "env", lambda _: None)
    assert (prefix / "lib" / "libfoo.txt").read_text() == "foo\n"
    assert any(seen) and PASSWORD not in _everything_written(tmp_path / "made", tmp_path / "lockgen-home", prefix)
    again = run_cli("-v", "materialize", str(lock), "--prefix", str(tmp_path / "env2"))
    assert again.returncode == 0 and PASSWORD not in again.stdout + again.stderr


def test_rattler_auth_file_with_a_wildcard_host(
    tmp_path: Path, private_channel: tuple[str, list], user_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, _ = private_channel
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps({"127.0.0.1": {"BasicHTTP": {"username": USER, "password": PASSWORD}}}))
    monkeypatch.setenv("RATTLER_AUTH_FILE", str(auth))
    lock = cpu_lock(_made(tmp_path), url, ["libfoo"])
    assert materialize(lock, None, tmp_path / "env", lambda _: None)[0].is_dir()
    assert PASSWORD not in lock.read_text()


@pytest.mark.slow
def test_without_credentials_the_error_says_where_they_go(
    tmp_path: Path, private_channel: tuple[str, list], user_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, _ = private_channel
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps({"127.0.0.1": {"BasicHTTP": {"username": USER, "password": PASSWORD}}}))
    monkeypatch.setenv("RATTLER_AUTH_FILE", str(auth))
    lock = cpu_lock(_made(tmp_path), url, ["libfoo"])
    monkeypatch.delenv("RATTLER_AUTH_FILE")
    with pytest.raises(ChannelError, match="HTTP 401") as raised:
        materialize(lock, None, tmp_path / "env", lambda _: None)
    assert "~/.netrc or $RATTLER_AUTH_FILE" in raised.value.hint
    refused = run_cli("materialize", str(lock), "--prefix", str(tmp_path / "env"))
    assert (
        refused.returncode == 1
        and "error: cannot fetch `libfoo`" in refused.stderr
        and "Traceback" not in refused.stderr
    )


def test_each_credential_form(tmp_path: Path, user_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    auth = tmp_path / "auth.json"
    auth.write_text(
        json.dumps(
            {
                "*.example.org": {"BearerToken": "tk"},
                "conda.acme.io": {"CondaToken": "ct-1"},
                "basic.acme.io": {"BasicHTTP": {"username": "u", "password": "p"}},
            }
        )
    )
    monkeypatch.setenv("RATTLER_AUTH_FILE", str(auth))
    assert fetch_auth.authorized("https://repo.example.org/c/x.conda") == (
        "https://repo.example.org/c/x.conda",
        {"Authorization": "Bearer tk"},
    )
    assert fetch_auth.authorized("https://conda.acme.io/c/x.conda") == ("https://conda.acme.io/t/ct-1/c/x.conda", {})
    assert fetch_auth.authorized("https://basic.acme.io/x")[1] == {"Authorization": "Basic dTpw"}
    assert fetch_auth.authorized("https://other.net/x") == ("https://other.net/x", {})
    assert fetch_auth.authorized("https://u:p@basic.acme.io/x") == ("https://u:p@basic.acme.io/x", {})  # named: as is
    token = fetch_auth.authorized_request("https://conda.acme.io/c/x.conda", {"Range": "bytes=0-9"})
    assert token.full_url == "https://conda.acme.io/t/ct-1/c/x.conda" and token.get_header("Range") == "bytes=0-9"
    basic = fetch_auth.authorized_request("https://basic.acme.io/x", {"Range": "bytes=0-9"})
    assert basic.get_header("Range") == "bytes=0-9" and basic.unredirected_hdrs == {"Authorization": "Basic dTpw"}
    auth.write_text("{not json")
    with pytest.raises(UserError, match="cannot read RATTLER_AUTH_FILE"):
        fetch_auth.authorized("https://basic.acme.io/x")


@pytest.mark.slow
def test_a_private_pypi_index_resolves_and_materializes_with_netrc(tmp_path: Path, user_home: Path) -> None:
    from lockgen.api import resolve as api
    from tests.wheel_index import Wheel, build_index

    root = build_index(tmp_path / "index", [Wheel("alpha", "1.0"), Wheel("gamma", "1.0", requires=("alpha",))])
    seen: list[str | None] = []
    handler = type("Handler", (_AuthHandler,), {"seen": seen})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        stack = tmp_path / "stack" / "stack.toml"
        stack.parent.mkdir()
        stack.write_text(
            f'[stack]\nname = "private"\npython = "3.11"\nplatforms = ["linux-64"]\n'
            f'[pypi-dependencies]\ngamma = "*"\n[pypi-options]\n'
            f'index-url = "http://127.0.0.1:{server.server_address[1]}/simple"\n[targets.cpu]\narch = "cpu"\n'
        )
        from lockgen.errors import LockgenError

        with pytest.raises(LockgenError):  # the index wants a credential nobody gave
            api.resolve(stack)
        netrc_file = user_home / ".netrc"
        netrc_file.write_text(f"machine 127.0.0.1 login {USER} password {PASSWORD}\n")
        netrc_file.chmod(0o600)
        api.resolve(stack)
        lock = stack.parent / "locks" / "cpu.conda-lock.yml"
        prefix, _ = materialize(lock, None, tmp_path / "env", lambda _: None)
        ran = __import__("subprocess").run([str(prefix / "bin" / "python"), "-c", "import gamma, alpha"])
        assert ran.returncode == 0 and any(seen)
        assert PASSWORD not in _everything_written(stack.parent, tmp_path / "lockgen-home", prefix)
    finally:
        server.shutdown()
