"""Running exported images in the tests: the OCI tools they need (a missing one fails the test, never skips
it) and podman from a per-test store, so a test shows that an image starts, as its users start it."""

from __future__ import annotations

import resource
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest


def require(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.fail(f"{tool} is not installed: .ci/run installs it with apt-get (skopeo, umoci, oci-image-tool)")
    return path


def host_ulimits() -> list[str]:
    """The README's `--ulimit` flags: this process's own nofile limits (`$(ulimit -n):$(ulimit -Hn)`: podman's default
    for root exceeds the hard limit of some hosts, and runc then cannot start the container) and podman's own nproc
    default, which a `--ulimit` given replaces."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return ["--ulimit", f"nofile={soft}:{hard}", "--ulimit", "nproc=32768:32768"]


def podman_run(layout: Path, tag: str, *command: str) -> subprocess.CompletedProcess[str]:
    """Runs the image `layout:tag` with podman from a per-test store (vfs), no network, runc and the
    README's ulimits (`host_ulimits`); podman refuses a runroot path over 50 characters, so the stores live in a short
    temporary folder, removed afterwards. No `command` runs the image's own entrypoint and cmd."""
    short = Path(tempfile.mkdtemp(prefix="lgp-", dir="/tmp"))
    root_dir, run_dir = short / "r", short / "rr"
    try:
        subprocess.run(
            [
                require("skopeo"),
                "copy",
                f"oci:{layout}:{tag}",
                f"containers-storage:[vfs@{root_dir}+{run_dir}]localhost/t:t",
            ],
            check=True,
            capture_output=True,
        )
        return subprocess.run(
            [
                require("podman"),
                "--root",
                str(root_dir),
                "--runroot",
                str(run_dir),
                "--storage-driver",
                "vfs",
                "--runtime",
                "runc",
                "run",
                "--rm",
                "--network",
                "none",
                *host_ulimits(),
                "localhost/t:t",
                *command,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        shutil.rmtree(short, ignore_errors=True)
