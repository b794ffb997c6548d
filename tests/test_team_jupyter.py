"""The team-jupyter example, end to end: the OS base its `os-base.sh` builds (Debian bookworm from Debian's
mirror: python3.11, OpenSSH, user 1000), the platform lock exported on it, the team lock (JupyterLab, two
`[image] services`) exported on the platform's image with `--base`, and the team image run under podman
with its ports published on 127.0.0.1 only: Jupyter answers its REST API (and refuses a request without the
token), sshd gives its banner and a key login runs a command as user 1000 in the environment, and
`podman stop` ends both servers at once through lockgen's service launcher.

podman runs from a per-test overlay store (vfs would copy the whole tree once for each of the image's
layers) with slirp4netns networking, whose port handler listens on the host's loopback itself, so the host
firewall is not edited (podman's default bridge would); port 22 inside needs
`--sysctl net.ipv4.ip_unprivileged_port_start=22` for user 1000 (podman 4.3 leaves the kernel's 1024)."""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from lockgen.adapters.image import oci_layout
from lockgen.adapters.lock.lockfile_yaml import load_lock
from tests.conftest import REPO, run_cli
from tests.test_export import require

pytestmark = [
    pytest.mark.slow,
    pytest.mark.xdist_group("team_jupyter"),
]  # its module fixtures are made once (pyproject: loadgroup)
EXAMPLE = REPO / "envs" / "examples" / "team-jupyter"
PLATFORM_LOCK = EXAMPLE / "platform" / "locks" / "cpu.conda-lock.yml"
TEAM_LOCK = EXAMPLE / "team" / "locks" / "cpu.conda-lock.yml"
TAG = "cpu-linux-64"
TOKEN = "test-token-0123456789"


def _export(lock: Path, out: Path, base: Path) -> None:
    done = run_cli("export", str(lock), "--base", str(base), "--out", str(out))
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the platform image, the team image), each exported on the one below it."""
    for tool in ("mmdebstrap", "umoci"):
        require(tool)
    folder = tmp_path_factory.mktemp("team-jupyter")
    built = subprocess.run(
        ["bash", str(EXAMPLE / "os-base.sh"), str(folder / "os-base")], capture_output=True, text=True, timeout=600
    )
    assert built.returncode == 0, built.stderr[-3000:]
    _export(PLATFORM_LOCK, folder / "platform-img", folder / "os-base")
    _export(TEAM_LOCK, folder / "team-img", folder / "platform-img")
    return folder / "platform-img", folder / "team-img"


def test_the_team_image_is_the_platform_image_plus_jupyter_and_its_services(images: tuple[Path, Path]) -> None:
    platform, team = images
    below = oci_layout.read_image(platform)[0]["layers"]
    manifest, config, _ = oci_layout.read_image(team)
    assert manifest["layers"][: len(below)] == below  # the platform image's layers, unchanged
    settings = config["config"]
    assert settings["Entrypoint"] == ["/opt/env/bin/python", "/opt/env/.lockgen/service_launcher.py"]
    assert "Cmd" not in settings and settings["User"] == "1000:1000" and settings["WorkingDir"] == "/home/dev"
    assert settings["ExposedPorts"] == {"22/tcp": {}, "8888/tcp": {}}
    checked = run_cli("check", "--image", str(team), "--lock", str(TEAM_LOCK))
    assert checked.returncode == 0, checked.stdout + checked.stderr  # the launcher does not blur the proof


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _until(deadline: float, what: str, attempt):  # type: ignore[no-untyped-def]
    """`attempt()`'s first value that is not None, retried until `deadline` (time.monotonic)."""
    last: object = None
    while time.monotonic() < deadline:
        try:
            value = attempt()
            if value is not None:
                return value
        except (OSError, urllib.error.URLError) as exc:
            last = exc
        time.sleep(0.5)
    pytest.fail(f"{what} did not answer before the deadline (last: {last})")


def _get(port: int, path: str, token: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", headers={"Authorization": f"token {token}"} if token else {}
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _answer(port: int, path: str) -> str | None:
    status, body = _get(port, path)
    return body if status == 200 else None


def _banner(port: int) -> str | None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as stream:
        line = stream.recv(256).decode(errors="replace")
    return line if line.startswith("SSH-2.0-") else None


@contextlib.contextmanager
def _podman(layout: Path) -> Iterator[list[str]]:
    """The podman command line for a per-test overlay store holding `layout:TAG` as localhost/team:jupyter;
    every container and the store are removed afterwards."""
    short = Path(tempfile.mkdtemp(prefix="lgj-", dir="/tmp"))  # podman refuses a runroot path over 50 characters
    podman = [
        require("podman"),
        "--root",
        str(short / "r"),
        "--runroot",
        str(short / "rr"),
        "--storage-driver",
        "overlay",
        "--runtime",
        "runc",
    ]
    try:
        subprocess.run(
            [
                require("skopeo"),
                "copy",
                "-q",
                f"oci:{layout}:{TAG}",
                f"containers-storage:[overlay@{short / 'r'}+{short / 'rr'}]localhost/team:jupyter",
            ],
            check=True,
            capture_output=True,
            timeout=300,
        )
        yield podman
    finally:
        subprocess.run([*podman, "rm", "-a", "-f", "-t", "0"], capture_output=True, timeout=120)
        subprocess.run([*podman, "rmi", "-a", "-f"], capture_output=True, timeout=120)
        shutil.rmtree(short, ignore_errors=True)


def test_jupyter_and_ssh_answer_on_loopback_and_stop_together(images: tuple[Path, Path], tmp_path: Path) -> None:
    _, team = images
    key = tmp_path / "id_ed25519"
    subprocess.run([require("ssh-keygen"), "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    web, ssh = _free_port(), _free_port()
    with _podman(team) as podman:
        started = subprocess.run(
            [
                *podman,
                "run",
                "-d",
                "--name",
                "jupyter",
                "--network",
                "slirp4netns:port_handler=slirp4netns",
                "-p",
                f"127.0.0.1:{web}:8888",
                "-p",
                f"127.0.0.1:{ssh}:22",
                "--sysctl",
                "net.ipv4.ip_unprivileged_port_start=22",
                "--ulimit",
                "nofile=20000:20000",
                "--ulimit",
                "nproc=32768:32768",
                "-e",
                f"JUPYTER_TOKEN={TOKEN}",
                "-e",
                f"SSH_AUTHORIZED_KEYS={key.with_suffix('.pub').read_text().strip()}",
                "localhost/team:jupyter",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert started.returncode == 0, started.stderr

        def logs() -> str:
            return subprocess.run([*podman, "logs", "jupyter"], capture_output=True, text=True, timeout=60).stderr

        deadline = time.monotonic() + 90
        try:
            body = _until(deadline, "Jupyter", lambda: _answer(web, "/api"))
            banner = _until(deadline, "sshd", lambda: _banner(ssh))
        except BaseException:
            print(logs())
            raise
        assert "version" in json.loads(body)  # Jupyter Server's REST API
        assert _get(web, "/api/status")[0] == 403  # no token, no server state
        status, body = _get(web, "/api/status", TOKEN)
        assert status == 200 and "started" in json.loads(body), body
        assert banner.startswith("SSH-2.0-OpenSSH_"), banner

        host_key = subprocess.run(
            [*podman, "exec", "jupyter", "cat", "/home/dev/.ssh/ssh_host_ed25519_key.pub"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert host_key.returncode == 0, host_key.stderr
        known = tmp_path / "known_hosts"
        known.write_text(f"[127.0.0.1]:{ssh} {host_key.stdout.strip()}\n")  # the container's own key, checked
        numpy = next(p.version for p in load_lock(TEAM_LOCK).package if p.name == "numpy")
        login = subprocess.run(
            [
                require("ssh"),
                "-F",
                "/dev/null",
                "-i",
                str(key),
                "-p",
                str(ssh),
                "-o",
                "BatchMode=yes",
                "-o",
                "StrictHostKeyChecking=yes",
                "-o",
                f"UserKnownHostsFile={known}",
                "-o",
                "ConnectTimeout=10",
                "dev@127.0.0.1",
                "id -u; pwd; python -c 'import numpy, sys; print(numpy.__version__, sys.prefix)'",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert login.returncode == 0, login.stderr + logs()
        assert login.stdout.split("\n")[:3] == ["1000", "/home/dev", f"{numpy} /opt/env"], login.stdout

        began = time.monotonic()
        stopped = subprocess.run([*podman, "stop", "-t", "20", "jupyter"], capture_output=True, text=True, timeout=60)
        assert stopped.returncode == 0, stopped.stderr
        assert time.monotonic() - began < 15  # the launcher forwarded SIGTERM; podman did not wait and kill
        code = subprocess.run(
            [*podman, "inspect", "--format", "{{.State.ExitCode}}", "jupyter"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert code.stdout.strip() == "0", code.stdout + code.stderr + logs()
        assert "[services] stopped on signal 15" in logs()
