"""The README's walk-through runs as written: the block between its walkthrough markers, each line a command,
with the example folder and /tmp/qs-* moved into a temporary folder (nothing is left behind): the base it
builds, the image it exports on it, and podman running that image's Python (from a store of the test's own)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = [pytest.mark.slow, pytest.mark.network]
RUN = ("lockgen ", "bash envs/", "podman run ")  # the block's commands; its other lines are comments


def podman_store(short: Path) -> str:
    """`podman` with a store of the test's own (vfs, runc; the ulimits are the README's own flag, which must work on
    these machines, whose nofile limit is below podman's default; podman refuses a
    runroot path over 50 characters, so it lives in a short folder of /tmp, removed after the test)."""
    return (
        f"podman --root {short / 'r'} --runroot {short / 'rr'} --storage-driver vfs --runtime runc run --network none"
    )


def walkthrough() -> list[str]:
    text = (REPO / "README.md").read_text()
    block = text.split("<!-- walkthrough -->", 1)[1].split("<!-- /walkthrough -->", 1)[0]
    return [line.split("  #")[0].strip() for line in block.splitlines() if line.startswith(RUN)]


def test_the_readme_walkthrough_runs_as_written(tmp_path: Path) -> None:
    commands = walkthrough()
    assert len(commands) >= 8 and commands[0].startswith("lockgen resolve")
    example, local = tmp_path / "quickstart", tmp_path / "local-package"
    shutil.copytree(REPO / "envs" / "examples" / "quickstart", example)
    shutil.copytree(REPO / "envs" / "examples" / "local-package", local, ignore=shutil.ignore_patterns("__pycache__"))
    lockgen = f"{sys.executable} -m lockgen"
    env = {**os.environ, "NO_COLOR": "1"}
    assert any(c.startswith("podman run ") and "python -c" in c for c in commands)  # the exported image runs
    said: dict[str, subprocess.CompletedProcess[str]] = {}
    short = Path(tempfile.mkdtemp(prefix="lgw-", dir="/tmp"))
    try:
        for command in commands:
            line = (
                command.replace("envs/examples/quickstart", str(example))
                .replace("envs/examples/local-package", str(local))
                .replace("/tmp/qs", str(tmp_path / "qs"))
                .replace("lockgen ", f"{lockgen} ", 1)
                .replace("podman run", podman_store(short), 1)
            )
            done = subprocess.run(line, shell=True, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
            assert done.returncode == 0, f"{command}\n{done.stderr[-2000:]}"
            said[" ".join(command.split()[:2])] = done
            if "import hello" in command:  # the local package, installed editable from its folder
                assert done.stdout == "hello from a local package\n", done.stderr
    finally:
        shutil.rmtree(short, ignore_errors=True)
    assert said["podman run"].stdout.strip() == "2.4.6", said[
        "podman run"
    ].stdout  # the lock's numpy, in the image's venv
    assert said["lockgen run"].stdout == "2.4.6\n" and said["lockgen detect"].stdout == "cpu\n"
    _the_digests_are_as_the_text_says(said, example, tmp_path, env)
    # the committed locks were fresh: resolving again changed no byte of them
    for copy, lock in [(example, lock) for lock in (REPO / "envs" / "examples" / "quickstart" / "locks").iterdir()] + [
        (local, REPO / "envs" / "examples" / "local-package" / "locks" / "cpu.conda-lock.yml")
    ]:
        assert (copy / "locks" / lock.name).read_bytes() == lock.read_bytes(), lock.name
    (local / "hello" / "src" / "hello" / "__init__.py").write_text(
        "def greeting():\n    return 'edited'\n"
    )  # editable: seen at once
    edited = subprocess.run(
        f"{lockgen} run {local} -- python -c 'import hello; print(hello.greeting())'",
        shell=True,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert edited.stdout == "edited\n" and "installed local package" not in edited.stderr, edited.stderr
    # a venv lockgen made is locked again through its index: uv's direct_url.json keeps no hash
    prefix, lockgen_cmd = tmp_path / "qs-env", [sys.executable, "-m", "lockgen"]
    frozen = subprocess.run(
        lockgen_cmd + ["freeze", "--prefix", str(prefix), "--target", "again", "--out", str(tmp_path / "f.yml")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert frozen.returncode == 1 and "lockgen pin inv.json.gz --target again" in frozen.stderr, frozen.stderr
    inventory, again = tmp_path / "inv.json.gz", tmp_path / "again.conda-lock.yml"
    for step in (
        ["freeze", "--python", str(prefix / "bin" / "python"), "--inventory", str(inventory)],
        ["pin", str(inventory), "--target", "again", "--out", str(again)],
        ["check", "--lock", str(again), "--prefix", str(prefix)],
    ):
        done = subprocess.run(lockgen_cmd + step, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
        assert done.returncode == 0, f"{step}\n{done.stderr[-2000:]}"


def _the_digests_are_as_the_text_says(
    said: dict[str, subprocess.CompletedProcess[str]], example: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    """The text after the block: each lock's sha256 as quoted, the store's environment named by it, the
    environment digest the same in two prefixes and another in the image, the image digest reproduced."""
    import hashlib
    import json
    import re

    text = (REPO / "README.md").read_text().split("<!-- /walkthrough -->", 1)[1]
    for name in ("cpu", "cpu-el7"):
        digest = hashlib.sha256((example / "locks" / f"{name}.conda-lock.yml").read_bytes()).hexdigest()
        assert f"`{digest[:12]}…`" in text, name
    cpu = hashlib.sha256((example / "locks" / "cpu.conda-lock.yml").read_bytes()).hexdigest()
    assert f"~/.lockgen/envs/{cpu[:16]}-cpu-linux-64" in text
    lockgen = [sys.executable, "-m", "lockgen"]
    stored = json.loads(subprocess.run(lockgen + ["envs", "--json"], capture_output=True, text=True, env=env).stdout)
    (store,) = [e for e in stored if e["lock_sha256"] == cpu and Path(e["prefix"]).name == f"{cpu[:16]}-cpu-linux-64"]
    environment = re.compile(r"environment digest sha256:([0-9a-f]{64})")
    (in_prefix,) = environment.findall(said["lockgen materialize"].stderr)
    (in_image,) = environment.findall(said["lockgen export"].stderr)
    assert store["environment_digest"] == in_prefix != in_image
    again = subprocess.run(
        lockgen
        + [
            "export",
            str(example / "locks" / "cpu.conda-lock.yml"),
            "--base",
            str(tmp_path / "qs-base"),
            "--out",
            str(tmp_path / "again"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert again.stdout == said["lockgen export"].stdout and again.stdout.startswith("sha256:"), again.stderr
