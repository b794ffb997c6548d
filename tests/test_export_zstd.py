"""`lockgen export --compression zstd`: zstd layers of the same tars as gzip's (same diff_ids), the same
bytes from two homes, a layer cache that never hands a gzip blob out as zstd, and an image that skopeo,
lockgen's own check and podman read (Debian's oci-image-tool 1.0.0-rc1 and umoci 0.4.7 know only gzip
layers: the first is shown to find nothing else wrong, the second unpacks skopeo's gzip copy)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from lockgen.adapters.image import oci_layout
from lockgen.api import resolve as api
from lockgen.api.check import check_image
from lockgen.api.export import export
from lockgen.model.requests import ExportRequest, Layering
from lockgen.errors import UserError
from lockgen.model.oci import LAYER_MEDIA_TYPES
from tests.channel_factory import Pkg, build_channel
from tests.conftest import run_cli
from tests.image_run import podman_run
from tests.test_export import make_lock, require

pytestmark = pytest.mark.slow  # every test here exports an image (and podman runs one)

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
GZIP_MAGIC = b"\x1f\x8b"


def export_as(lock: Path, out: Path, home: Path, compression: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("LOCKGEN_HOME", str(home))
    return export(ExportRequest(lock, out, layering=Layering(compression=compression, level=3)), lambda _: None).digest


def layer_blobs(layout: Path) -> list[tuple[str, bytes]]:
    manifest, _, _ = oci_layout.read_image(layout)
    return [
        (layer["mediaType"], (layout / "blobs" / "sha256" / layer["digest"].split(":", 1)[1]).read_bytes())
        for layer in manifest["layers"]
    ]


def test_zstd_layers_are_the_same_tars_and_the_same_bytes_from_two_homes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock = make_lock(tmp_path, "1.0")
    first = export_as(lock, tmp_path / "a", tmp_path / "home-a", "zstd", monkeypatch)
    second = export_as(lock, tmp_path / "b", tmp_path / "home-b", "zstd", monkeypatch)
    assert first == second
    files = lambda root: {p.relative_to(root): p.read_bytes() for p in root.rglob("*") if p.is_file()}  # noqa: E731
    assert files(tmp_path / "a") == files(tmp_path / "b")
    assert all(
        media == LAYER_MEDIA_TYPES["zstd"] and data.startswith(ZSTD_MAGIC)
        for media, data in layer_blobs(tmp_path / "a")
    )
    # the same home's gzip layers are cached by content: zstd must not be served from them, nor the reverse
    gzip_digest = export_as(lock, tmp_path / "gz", tmp_path / "home-a", "gzip", monkeypatch)
    assert gzip_digest != first
    assert all(
        media == LAYER_MEDIA_TYPES["gzip"] and data.startswith(GZIP_MAGIC)
        for media, data in layer_blobs(tmp_path / "gz")
    )
    diff_ids = lambda layout: oci_layout.read_image(layout)[1]["rootfs"]["diff_ids"]  # noqa: E731
    assert diff_ids(tmp_path / "a") == diff_ids(tmp_path / "gz")  # diff_ids name the uncompressed tars
    again = export_as(lock, tmp_path / "again", tmp_path / "home-a", "zstd", monkeypatch)
    assert again == first


def test_a_zstd_image_passes_the_oci_tools_and_lockgen_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lock = make_lock(tmp_path, "1.0")
    digest = export_as(lock, tmp_path / "img", tmp_path / "home", "zstd", monkeypatch)
    # Debian's oci-image-tool (1.0.0-rc1) predates image-spec 1.1, which added the zstd layer media type: its one
    # complaint must be that media type, every other check (layout, index, manifest, config, digests) passing
    validated = subprocess.run(
        [
            require("oci-image-tool"),
            "validate",
            "--type",
            "image",
            "--ref",
            "name=h100-linux-64",
            str(tmp_path / "img"),
        ],
        capture_output=True,
        text=True,
    )
    assert "1 errors detected" in validated.stderr, validated.stderr
    assert f'invalid descriptor MediaType \\"{LAYER_MEDIA_TYPES["zstd"]}\\"' in validated.stderr, validated.stderr
    raw = json.loads(
        subprocess.run(
            [require("skopeo"), "inspect", "--raw", f"oci:{tmp_path / 'img'}:h100-linux-64"],
            capture_output=True,
            check=True,
        ).stdout
    )
    assert {layer["mediaType"] for layer in raw["layers"]} == {LAYER_MEDIA_TYPES["zstd"]}
    inspected = json.loads(
        subprocess.run(
            [require("skopeo"), "inspect", f"oci:{tmp_path / 'img'}:h100-linux-64"],
            capture_output=True,
            check=True,
            text=True,
        ).stdout
    )
    assert inspected["Digest"] == digest and inspected["Labels"]["dev.lockgen.target"] == "h100"
    checked = check_image(tmp_path / "img", lock)
    expected, got, drift = checked.recorded, checked.recomputed, checked.drift  # lockgen's own unpack reads zstd
    assert expected == got and drift.clean
    # Debian's umoci (0.4.7) refuses zstd layers: skopeo decompresses them (recompressing as gzip), umoci unpacks that
    subprocess.run(
        [
            require("skopeo"),
            "copy",
            "--dest-compress",
            "--dest-compress-format",
            "gzip",
            f"oci:{tmp_path / 'img'}:h100-linux-64",
            f"oci:{tmp_path / 'gzip-copy'}:h100",
        ],
        check=True,
        capture_output=True,
    )
    copied_manifest, copied_config, _ = oci_layout.read_image(tmp_path / "gzip-copy")
    assert {layer["mediaType"] for layer in copied_manifest["layers"]} == {LAYER_MEDIA_TYPES["gzip"]}
    assert copied_config["rootfs"]["diff_ids"] == oci_layout.read_image(tmp_path / "img")[1]["rootfs"]["diff_ids"]
    bundle = tmp_path / "bundle"
    subprocess.run(
        [require("umoci"), "unpack", "--image", f"{tmp_path / 'gzip-copy'}:h100", str(bundle)],
        check=True,
        capture_output=True,
    )
    assert (bundle / "rootfs" / "opt" / "env" / "lib" / "libfoo.txt").read_text() == "foo 1.0\n"


def test_podman_runs_a_zstd_image(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "hello.c"
    source.write_text(
        '#include <stdio.h>\n#include <unistd.h>\nint main(void){printf("uid=%d zstd\\n",(int)getuid());return 0;}\n'
    )
    subprocess.run([require("gcc"), "-static", "-O2", "-o", str(tmp_path / "hello"), str(source)], check=True)
    channel = build_channel(
        tmp_path / "channel", [Pkg("hello", "1.0", files={"bin/hello": (tmp_path / "hello").read_bytes()})]
    )
    stack = tmp_path / "stack" / "stack.toml"
    stack.parent.mkdir()
    stack.write_text(
        f'[stack]\nname = "run"\nchannels = ["{channel.as_uri()}"]\n[dependencies]\nhello = '
        '"*"\n[targets.cpu]\narch = "cpu"\n'
    )
    api.resolve(stack)
    export_as(stack.parent / "locks" / "cpu.conda-lock.yml", tmp_path / "img", tmp_path / "home", "zstd", monkeypatch)
    podman = podman_run(tmp_path / "img", "cpu-linux-64", "/opt/env/bin/hello")
    assert podman.returncode == 0, podman.stderr
    assert podman.stdout == "uid=1000 zstd\n"


def test_unknown_compression_or_level_is_one_error_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lock = make_lock(tmp_path, "1.0")
    with pytest.raises(UserError, match="zstd has no level 20"):
        export(ExportRequest(lock, tmp_path / "x", layering=Layering(compression="zstd", level=20)), lambda _: None)
    with pytest.raises(UserError, match="gzip has no level 0"):
        export(ExportRequest(lock, tmp_path / "x", layering=Layering(level=0)), lambda _: None)
    refused = run_cli(
        "export",
        str(lock),
        "--out",
        str(tmp_path / "x"),
        "--compression",
        "brotli",
        env={"LOCKGEN_HOME": str(tmp_path / "home")},
    )
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert refused.stderr.splitlines()[-2:] == ["error: unknown compression `brotli`", "hint: compressions: gzip, zstd"]
    assert not (tmp_path / "x").exists()
