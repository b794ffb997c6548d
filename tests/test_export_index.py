"""`lockgen export --platform linux-64 --platform linux-aarch64` (or `--all-platforms`): one layout, one tag,
an OCI image index of one image per platform (the aarch64 environment linked on this x86 host by rattler,
nothing of it run), the same bytes from two homes, read by oci-image-tool and skopeo per architecture;
refusals (a foreign pure-PyPI environment, a docker-archive) are one error line with nothing written."""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import subprocess
import threading
from pathlib import Path

import pytest

from lockgen.api import resolve as api
from lockgen.api.check import check_image
from lockgen.api.export import export
from lockgen.model.requests import ExportRequest, FromLock
from lockgen.errors import LockFormatError, UserError
from lockgen.model.oci import INDEX_MEDIA_TYPE, MANIFEST_MEDIA_TYPE
from tests.channel_factory import Pkg, build_channel
from tests.conftest import _QuietHandler, run_cli
from tests.test_export import require
from tests.wheel_index import Wheel, build_index


def two_platform_lock(tmp_path: Path) -> Path:
    """libfoo built for linux-64 and linux-aarch64 (different files), two noarch packages both platforms share."""
    channel = build_channel(
        tmp_path / "channel",
        [
            *(
                Pkg(
                    "libfoo",
                    "1.0",
                    subdir=subdir,
                    files={"lib/libfoo.txt": f"foo for {subdir}\n"},
                    depends=("cuda-version >=12",),
                )
                for subdir in ("linux-64", "linux-aarch64")
            ),
            Pkg("foo-data", "2.0", subdir="noarch", archive=".tar.bz2", depends=("libfoo",)),
            Pkg("cuda-version", "12.4", subdir="noarch", build="h0_3"),
        ],
    )
    stack = tmp_path / "stack" / "stack.toml"
    stack.parent.mkdir()
    stack.write_text(
        f'[stack]\nname = "img"\nchannels = ["{channel.as_uri()}"]\nplatforms = ["linux-64", '
        '"linux-aarch64"]\n[dependencies]\nfoo-data = "*"\n[targets.h100]\narch = "sm90"\ndriver = "575.57.08"\n'
    )
    api.resolve(stack)
    return stack.parent / "locks" / "h100.conda-lock.yml"


def blob(layout: Path, digest: str) -> dict:
    return json.loads((layout / "blobs" / "sha256" / digest.split(":", 1)[1]).read_bytes())


@pytest.mark.slow
def test_an_index_of_two_platforms_same_bytes_from_two_homes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lock = two_platform_lock(tmp_path)
    digests = []
    for run in ("a", "b"):
        monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / f"home-{run}"))
        digests.append(
            export(ExportRequest(lock, tmp_path / run, FromLock(("linux-64", "linux-aarch64"), True)), lambda _: None)
        )
    assert digests[0] == digests[1]
    files = lambda root: {p.relative_to(root): p.read_bytes() for p in root.rglob("*") if p.is_file()}  # noqa: E731
    assert files(tmp_path / "a") == files(tmp_path / "b")
    layout = tmp_path / "a"
    top = json.loads((layout / "index.json").read_text())["manifests"]
    assert len(top) == 1 and top[0]["mediaType"] == INDEX_MEDIA_TYPE and top[0]["digest"] == digests[0].digest
    assert top[0]["annotations"] == {"org.opencontainers.image.ref.name": "h100"}
    index = blob(layout, top[0]["digest"])
    assert index["mediaType"] == INDEX_MEDIA_TYPE
    assert [(m["mediaType"], m["platform"]) for m in index["manifests"]] == [
        (MANIFEST_MEDIA_TYPE, {"architecture": "amd64", "os": "linux"}),
        (MANIFEST_MEDIA_TYPE, {"architecture": "arm64", "os": "linux"}),
    ]
    configs = [blob(layout, blob(layout, m["digest"])["config"]["digest"]) for m in index["manifests"]]
    assert [c["architecture"] for c in configs] == ["amd64", "arm64"]
    x86_ids, arm_ids = (c["rootfs"]["diff_ids"] for c in configs)
    assert len(set(x86_ids) & set(arm_ids)) == 2  # foo-data and cuda-version (noarch): one layer for both platforms
    env_digests = digests[0].environment_digests
    assert set(env_digests) == {"linux-64", "linux-aarch64"} and env_digests["linux-64"] != env_digests["linux-aarch64"]
    assert {p.name for p in layout.glob("sbom.*.cdx.json")} == {"sbom.linux-64.cdx.json", "sbom.linux-aarch64.cdx.json"}
    with pytest.raises(LockFormatError, match="holds an image index"):
        check_image(layout)


@pytest.mark.slow
def test_oci_image_tool_and_skopeo_read_the_index_per_architecture(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock = two_platform_lock(tmp_path)
    exported = run_cli(
        "export",
        str(lock),
        "--all-platforms",
        "--out",
        str(tmp_path / "img"),
        "--json",
        env={"LOCKGEN_HOME": str(tmp_path / "home")},
    )
    assert exported.returncode == 0, exported.stderr
    result = json.loads(exported.stdout)
    assert set(result["environment_digests"]) == {"linux-64", "linux-aarch64"}
    tool = require("oci-image-tool")

    def validate(kind: str, path: Path, *ref: str) -> None:
        validated = subprocess.run([tool, "validate", "--type", kind, *ref, str(path)], capture_output=True, text=True)
        assert validated.returncode == 0, validated.stdout + validated.stderr

    # Debian's oci-image-tool (1.0.0-rc1) finds the tag but does not descend into a nested index: the index blob
    # is validated on its own, and each platform's image once skopeo has copied it out
    validate("image", tmp_path / "img", "--ref", "name=h100")
    index_digest = result["image_digest"].split(":", 1)[1]
    validate("imageIndex", tmp_path / "img" / "blobs" / "sha256" / index_digest)
    reference = f"oci:{tmp_path / 'img'}:h100"
    raw = subprocess.run([require("skopeo"), "inspect", "--raw", reference], capture_output=True, check=True).stdout
    assert "sha256:" + hashlib.sha256(raw).hexdigest() == result["image_digest"]
    assert json.loads(raw)["mediaType"] == INDEX_MEDIA_TYPE
    for arch, platform in (("amd64", "linux-64"), ("arm64", "linux-aarch64")):
        inspected = json.loads(
            subprocess.run(
                [require("skopeo"), "inspect", "--override-arch", arch, reference],
                capture_output=True,
                check=True,
                text=True,
            ).stdout
        )
        assert inspected["Architecture"] == arch
        assert (
            inspected["Labels"]["dev.lockgen.environment.digest"] == "sha256:" + result["environment_digests"][platform]
        )
        # one platform copied out is a whole image: valid, and its files are the environment it records
        subprocess.run(
            [require("skopeo"), "copy", "--override-arch", arch, reference, f"oci:{tmp_path / arch}:h100"],
            check=True,
            capture_output=True,
        )
        validate("image", tmp_path / arch, "--ref", "name=h100")
        checked = check_image(tmp_path / arch)
        recorded, recomputed, drift = checked.recorded, checked.recomputed, checked.drift
        assert recorded == recomputed == result["environment_digests"][platform] and drift.clean
    bundle = tmp_path / "bundle"
    subprocess.run(
        [require("umoci"), "unpack", "--image", f"{tmp_path / 'arm64'}:h100", str(bundle)],
        check=True,
        capture_output=True,
    )
    assert (bundle / "rootfs" / "opt" / "env" / "lib" / "libfoo.txt").read_text() == "foo for linux-aarch64\n"


@pytest.mark.slow
def test_refusals_are_one_error_line_and_write_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    root = build_index(tmp_path / "index", [Wheel("alpha", "1.0")])
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        stack = tmp_path / "pypi" / "stack.toml"
        stack.parent.mkdir()
        stack.write_text(
            '[stack]\nname = "pure"\npython = "3.11"\nplatforms = ["linux-64", "linux-aarch64"]\n'
            '[pypi-dependencies]\nalpha = "*"\n[pypi-options]\nindex-url = '
            f'"http://127.0.0.1:{server.server_address[1]}/simple"\n'
            '[targets.cpu]\narch = "cpu"\n'
        )
        api.resolve(stack)
    finally:
        server.shutdown()
    pure = stack.parent / "locks" / "cpu.conda-lock.yml"
    refused = run_cli("export", str(pure), "--all-platforms", "--out", str(tmp_path / "out"))
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert refused.stderr.splitlines()[-2:] == [
        "error: the lock's linux-aarch64 environment has PyPI packages, which only a linux-aarch64 host can install",
        "hint: export linux-aarch64 on a linux-aarch64 host, or pass --platform linux-64",
    ]
    lock = two_platform_lock(tmp_path)
    with pytest.raises(UserError, match="a docker-archive holds one image"):
        export(ExportRequest(lock, tmp_path / "out.tar", FromLock((), True), fmt="docker-archive"), lambda _: None)
    with pytest.raises(UserError, match="the lock has no platform `osx-arm64`"):
        export(ExportRequest(lock, tmp_path / "out", FromLock(("linux-64", "osx-arm64"), True)), lambda _: None)
    with pytest.raises(UserError, match="named twice"):
        export(ExportRequest(lock, tmp_path / "out", FromLock(("linux-64", "linux-64"), True)), lambda _: None)
    usage = run_cli("export", str(lock), "--all-platforms", "--platform", "linux-64", "--out", str(tmp_path / "out"))
    assert (
        usage.returncode == 2
        and usage.stderr.splitlines()[0] == "error: --all-platforms and --platform exclude each other"
    )
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.tar").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".lockgen-export-")]
