"""A real torch stack as an image, end to end on a CPU host: a pure-PyPI lock of this host's CPU torch
wheel (from a PEP 503 index the test writes over pip's local wheels) -> export on a base holding this
host's Debian /usr/bin/pythonX.Y (`tests/python_base.py`; the venv pointed at it, no build-host path) -> `check --image`
-> `verify --arch cpu --image`,
whose certificate names the image and environment digests."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import subprocess
from pathlib import Path

import pytest

from lockgen.adapters.lock.lockfile_yaml import load_lock
from tests.conftest import run_cli, unsealed
from tests.python_base import PYTHON, python_base
from tests.torch_stack import torch_lock

pytestmark = [
    pytest.mark.slow,
    pytest.mark.xdist_group("image_torch"),
]  # its module fixtures are made once (pyproject: loadgroup)


@pytest.fixture(scope="module")
def torch_image(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    folder = tmp_path_factory.mktemp("torch-image")
    base = python_base(folder / "base")
    lock = torch_lock(folder)
    exported = run_cli("export", str(lock), "--base", str(base), "--out", str(folder / "img"))
    assert exported.returncode == 0, exported.stderr
    assert f"the venv runs on the base image's /usr/bin/python{PYTHON}" in exported.stderr
    return lock, folder / "img", exported.stdout.strip().splitlines()[0]


def test_the_torch_image_holds_its_lock_and_no_build_host_path(torch_image: tuple[Path, Path, str]) -> None:
    lock, image, _ = torch_image
    checked = run_cli("check", "--image", str(image), "--lock", str(lock))
    assert checked.returncode == 0, checked.stderr
    unpacked = subprocess.run(
        ["umoci", "raw", "unpack", "--rootless", "--image", f"{image}:cpu-linux-64", str(image.parent / "rootfs")],
        capture_output=True,
        text=True,
    )
    assert unpacked.returncode == 0, unpacked.stderr
    venv = image.parent / "rootfs" / "opt" / "env"
    assert (venv / "bin" / "python").readlink() == Path(f"/usr/bin/python{PYTHON}")
    distributions = list(venv.glob("lib/python*/site-packages/*.dist-info"))
    manifest = json.loads(
        (
            image
            / "blobs"
            / "sha256"
            / json.loads((image / "index.json").read_text())["manifests"][0]["digest"].split(":")[1]
        ).read_text()
    )
    assert len(manifest["layers"]) == 1 + len(distributions) + 1  # the base's, a layer per wheel, then the venv itself
    assert "home = /usr/bin\n" in (venv / "pyvenv.cfg").read_text()


def test_verify_runs_the_kernel_in_the_image(torch_image: tuple[Path, Path, str], tmp_path: Path) -> None:
    lock, image, digest = torch_image
    out = tmp_path / "image.cert.json"
    result = run_cli(
        "verify", "--arch", "cpu", "--quick", "--image", str(image), "--lock", str(lock), "--out", str(out)
    )
    assert result.returncode == 0, result.stderr
    body = json.loads(out.read_text())["certificate"]
    assert body["passed"], [c for c in body["checks"] if not c["passed"]]
    subject = body["subject"]
    assert digest.endswith(subject["image_digest"].removeprefix("sha256:"))
    assert (
        subject["python"] == "/opt/env/bin/python"
        and subject["lock_sha256"] == hashlib.sha256(lock.read_bytes()).hexdigest()
    )
    assert body["stack"]["torch"] == importlib.metadata.version("torch")


def test_verify_refuses_an_image_of_another_lock(torch_image: tuple[Path, Path, str], tmp_path: Path) -> None:
    """A lock whose torch wheel is another file: the image is not its environment, whatever its labels say."""
    lock, image, _ = torch_image
    torch = next(p for p in load_lock(lock).package if p.name == "torch")
    other = tmp_path / "other.conda-lock.yml"
    other.write_text(
        unsealed(lock.read_text().replace(torch.hash.sha256 or "", "a" * 64))
    )  # past the package-set record: the image check itself
    result = run_cli(
        "verify",
        "--arch",
        "cpu",
        "--quick",
        "--image",
        str(image),
        "--lock",
        str(other),
        "--out",
        str(tmp_path / "x.cert.json"),
    )
    assert result.returncode == 1 and "the lock pins" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "x.cert.json").exists()
