"""`[image] services`: several long-running programs in one image. The lock records them, export makes the
entrypoint the environment's Python running lockgen's service launcher (`lockgen/data/service_launcher.py`),
and the launcher behaves as a container's PID 1 must: it forwards stop signals, and when one service ends the
container ends with its status. The launcher is run here on this host's Python; `test_team_jupyter.py` runs it
in a podman container."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lockgen.core.image.image_config import image_config
from lockgen.core.lock.lock_meta import image_text
from lockgen.core.stack.spec_parse import parse_stack_text as parse_stack
from lockgen.errors import UserError

LAUNCHER = Path(__file__).resolve().parent.parent / "lockgen" / "data" / "service_launcher.py"
STACK = '[stack]\nname = "t"\npython = "3.11"\n[pypi-dependencies]\nsix = "*"\n[targets.cpu]\narch = "cpu"\n[image]\n'


class _Lock:
    """The two lock fields image_config reads, without resolving anything."""

    def __init__(self, image: str) -> None:
        self._meta = {"image": image, "stack": "t", "target": "cpu", "arch": "cpu"}

    def meta(self, key: str) -> str:
        return self._meta.get(key, "")

    def packages_for(self, _platform: str) -> list[object]:
        return []


def test_services_are_recorded_and_become_the_launcher_entrypoint() -> None:
    spec = parse_stack(
        STACK + 'workdir = "/home/dev"\n[image.services]\nweb = ["python", "-m", "http.server"]\nssh = '
        '["/usr/sbin/sshd", "-D"]\n'
    )
    recorded = json.loads(image_text(spec))
    assert recorded["services"] == {"ssh": ["/usr/sbin/sshd", "-D"], "web": ["python", "-m", "http.server"]}
    base = {"config": {"Entrypoint": ["/bin/base"], "Cmd": ["bash"], "Env": ["PATH=/usr/bin"]}}
    lock = _Lock(image_text(spec))
    config = image_config(lock, "linux-64", "a" * 64, "b" * 64, [], base)["config"]  # type: ignore[arg-type]
    assert config["Entrypoint"] == ["/opt/env/bin/python", "/opt/env/.lockgen/service_launcher.py"]
    assert "Cmd" not in config  # the base's cmd would become the launcher's arguments
    assert "services" not in json.loads(image_text(parse_stack(STACK + 'workdir = "/w"\n')))  # older locks unchanged


def test_a_base_config_s_null_settings_read_as_none_and_its_others_are_kept() -> None:
    """A base config whose `Env` and `Labels` are null (the image-spec allows it; `check_image` accepts it) crashed
    export with a TypeError (exit 3): they are none, and the base's settings lockgen does not name stay."""
    spec = parse_stack(STACK + 'exposed-ports = ["8080/tcp"]\n')
    base = {
        "config": {"Env": None, "Labels": None, "Healthcheck": {"Test": ["NONE"]}, "ExposedPorts": {"22/tcp": {}}},
        "rootfs": {"type": "layers", "diff_ids": []},
    }
    lock = _Lock(image_text(spec))
    config = image_config(lock, "linux-64", "a" * 64, "b" * 64, [], base)["config"]  # type: ignore[arg-type]
    assert config["Env"] == [
        "PATH=/opt/env/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "CONDA_PREFIX=/opt/env",
    ]
    assert config["Labels"] is not None and config["Labels"]["dev.lockgen.target"] == "cpu"
    assert config["Healthcheck"] == {"Test": ["NONE"]}
    assert config["ExposedPorts"] == {"22/tcp": {}, "8080/tcp": {}}


@pytest.mark.parametrize(
    ("lines", "fragment"),
    [
        ('[image.services]\n"Web UI" = ["x"]\n', "must be lower-case letters"),
        ("[image.services]\nweb = []\n", "needs a command"),
        ('entrypoint = ["/bin/x"]\n[image.services]\nweb = ["x"]\n', "both say what the image runs"),
    ],
)
def test_bad_services_are_one_error(tmp_path: Path, lines: str, fragment: str) -> None:
    with pytest.raises(UserError, match=fragment):
        parse_stack(STACK + lines)


def _launch(tmp_path: Path, services: dict[str, list[str]]) -> subprocess.Popen[str]:
    folder = tmp_path / ".lockgen"
    folder.mkdir()
    (folder / "service_launcher.py").write_bytes(LAUNCHER.read_bytes())
    (folder / "services.json").write_text(json.dumps(services))
    return subprocess.Popen([sys.executable, str(folder / "service_launcher.py")], stderr=subprocess.PIPE, text=True)


def test_when_one_service_ends_the_launcher_stops_the_others_and_exits_with_its_status(tmp_path: Path) -> None:
    started = time.monotonic()
    launcher = _launch(tmp_path, {"fails": ["sh", "-c", "sleep 0.3; exit 3"], "serves": ["sleep", "60"]})
    _, stderr = launcher.communicate(timeout=30)
    assert launcher.returncode == 3, stderr
    assert "fails exited with status 3; stopping the others" in stderr
    assert time.monotonic() - started < 8  # `serves` got SIGTERM, not the 60 s or the grace period


def test_a_stop_signal_reaches_every_service_and_the_launcher_exits_0(tmp_path: Path) -> None:
    launcher = _launch(tmp_path, {"a": ["sleep", "60"], "b": ["sleep", "60"]})
    deadline = time.monotonic() + 10
    while launcher.stderr is not None and time.monotonic() < deadline:  # both started
        if "started b" in launcher.stderr.readline():
            break
    launcher.send_signal(signal.SIGTERM)
    _, stderr = launcher.communicate(timeout=30)
    assert launcher.returncode == 0, stderr
    assert "stopped on signal 15" in stderr
