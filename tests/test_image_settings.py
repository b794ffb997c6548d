"""`[image]` in stack.toml: what an exported image runs and exposes (entrypoint, cmd, env, workdir, user,
exposed ports, labels, volumes), recorded in the lock, applied by export, and run under podman."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from lockgen.adapters.image import oci_layout
from lockgen.adapters.lock.lockfile_yaml import load_lock
from lockgen.api import resolve as api
from tests.channel_factory import Pkg, build_channel
from tests.conftest import run_cli
from tests.image_run import podman_run, require
from tests.test_export import run_export

SHOW = (
    "#include <stdio.h>\n#include <stdlib.h>\n#include <unistd.h>\nint main(int c,char**v){char d[256];"
    'getcwd(d,sizeof d);printf("uid=%d cwd=%s greeting=%s args=",(int)getuid(),d,getenv("GREETING"));'
    'for(int i=1;i<c;i++)printf("%s ",v[i]);printf("\\n");return 0;}\n'
)
IMAGE = (
    '[image]\nentrypoint = ["/opt/env/bin/show"]\ncmd = ["first", "second"]\nenv = { GREETING = "hi" }\n'
    'workdir = "/tmp"\nuser = "1001:1001"\nexposed-ports = [8888, "22/tcp"]\nvolumes = ["/data"]\n'
    'labels = { "org.example.team" = "ml" }\n'
)


def stack_with_image(tmp_path: Path, image: str) -> Path:
    source = tmp_path / "show.c"
    source.write_text(SHOW)
    subprocess.run([require("gcc"), "-static", "-O2", "-o", str(tmp_path / "show"), str(source)], check=True)
    channel = build_channel(
        tmp_path / "channel", [Pkg("show", "1.0", files={"bin/show": (tmp_path / "show").read_bytes()})]
    )
    stack = tmp_path / "stack" / "stack.toml"
    stack.parent.mkdir()
    stack.write_text(
        f'[stack]\nname = "run"\nchannels = ["{channel.as_uri()}"]\n[dependencies]\nshow = '
        f'"*"\n[targets.cpu]\narch = "cpu"\n{image}'
    )
    api.resolve(stack)
    return stack


@pytest.mark.slow
def test_the_image_runs_and_exposes_what_the_stack_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stack = stack_with_image(tmp_path, IMAGE)
    lock = stack.parent / "locks" / "cpu.conda-lock.yml"
    assert json.loads(load_lock(lock).meta("image"))["user"] == "1001:1001"
    digest = run_export(lock, tmp_path / "img", tmp_path / "home", monkeypatch)
    _, config, _ = oci_layout.read_image(tmp_path / "img")
    settings = config["config"]
    assert settings["Entrypoint"] == ["/opt/env/bin/show"] and settings["Cmd"] == ["first", "second"]
    assert settings["User"] == "1001:1001" and settings["WorkingDir"] == "/tmp"
    assert settings["ExposedPorts"] == {"22/tcp": {}, "8888/tcp": {}} and settings["Volumes"] == {"/data": {}}
    assert "GREETING=hi" in settings["Env"] and settings["Env"][0].startswith("PATH=/opt/env/bin:")
    assert settings["Labels"]["org.example.team"] == "ml" and settings["Labels"]["dev.lockgen.target"] == "cpu"
    assert run_export(lock, tmp_path / "again", tmp_path / "home2", monkeypatch) == digest  # reproducible
    ran = podman_run(tmp_path / "img", "cpu-linux-64")  # no command: the image's entrypoint and cmd
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "uid=1001 cwd=/tmp greeting=hi args=first second \n"
    stack.write_text(stack.read_text().replace('GREETING = "hi"', 'GREETING = "hello"'))
    stale = run_cli("resolve", str(stack), "--check")
    assert stale.returncode == 1 and "spec-changed" in stale.stdout and "[image] settings changed" in stale.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ('user = "0"', "must not be root"),
        ('labels = { "dev.lockgen.lock.sha256" = "x" }', "is lockgen's"),
        ('env = { CONDA_PREFIX = "/x" }', "is the environment's own"),
        ('exposed-ports = ["http"]', "must be PORT"),
        ('volumes = ["data"]', "must be an absolute path"),
        ('shell = ["/bin/sh"]', "unknown key `shell` in [image]"),
    ],
)
def test_bad_image_settings_are_one_error_naming_the_line(tmp_path: Path, line: str, fragment: str) -> None:
    stack = tmp_path / "stack.toml"
    stack.write_text(
        '[stack]\nname = "t"\npython = "3.11"\n[pypi-dependencies]\nsix = "*"\n[targets.cpu]\narch = '
        f'"cpu"\n[image]\n{line}\n'
    )
    done = run_cli("resolve", str(stack), "--dry-run")
    assert done.returncode == 1 and fragment in done.stderr and f"{stack}:9:" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "locks").exists()
