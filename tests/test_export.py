"""Export on channels of real archives: the same digest from two homes and umasks, layers per package
(a one-package change moves one package layer), the image checked by lockgen, skopeo and umoci."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from lockgen.api import resolve as api
from lockgen.adapters.image import oci_layout
from lockgen.adapters.lock.lockfile_yaml import load_lock
from lockgen.api.check import check_image, check_lock
from lockgen.api.export import export
from lockgen.model.requests import ExportRequest, Image
from lockgen.core.image.sbom import cyclonedx
from lockgen.digests import canonical_json, file_digest
from lockgen.errors import LockFormatError, UserError
from tests.channel_factory import Pkg, build_channel
from tests.conftest import loopback_registry, run_cli
from tests.image_run import podman_run, require


def make_lock(tmp_path: Path, libfoo: str) -> Path:
    channel = tmp_path / "channel"
    if not channel.exists():
        build_channel(
            channel,
            [
                *(
                    Pkg(
                        "libfoo",
                        v,
                        files={"lib/libfoo.txt": f"foo {v}\n", "bin/foo": "#!/bin/sh\necho foo\n"},
                        depends=("cuda-version >=12",),
                    )
                    for v in ("1.0", "1.1")
                ),
                Pkg("foo-data", "2.0", subdir="noarch", archive=".tar.bz2", depends=("libfoo",)),
                Pkg("cuda-version", "12.4", subdir="noarch", build="h0_3"),
            ],
        )
    stack = tmp_path / f"stack-{libfoo}" / "stack.toml"
    stack.parent.mkdir()
    stack.write_text(
        f'[stack]\nname = "img"\nchannels = ["{channel.as_uri()}"]\n[dependencies]\nfoo-data = "*"\nlibfoo = '
        f'"=={libfoo}"\n[targets.h100]\narch = "sm90"\ndriver = "575.57.08"\n'
    )
    api.resolve(stack)
    return stack.parent / "locks" / "h100.conda-lock.yml"


def run_export(lock: Path, out: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("LOCKGEN_HOME", str(home))
    return export(ExportRequest(lock, out), lambda _: None).digest


def test_same_bytes_from_two_homes_and_umasks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lock = make_lock(tmp_path, "1.0")
    first = run_export(lock, tmp_path / "a", tmp_path / "home-a", monkeypatch)
    old = os.umask(0o077)
    try:
        second = run_export(lock, tmp_path / "b", tmp_path / "home-b", monkeypatch)
    finally:
        os.umask(old)
    assert first == second
    files = lambda root: {p.relative_to(root): p.read_bytes() for p in root.rglob("*") if p.is_file()}  # noqa: E731
    assert files(tmp_path / "a") == files(tmp_path / "b")


def test_image_contents_config_and_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lock = make_lock(tmp_path, "1.0")
    digest = run_export(lock, tmp_path / "img", tmp_path / "home", monkeypatch)
    manifest, config, recorded = oci_layout.read_image(tmp_path / "img")
    assert recorded == digest and len(manifest["layers"]) == 4  # three packages, then the rest
    assert config["config"]["User"] == "1000:1000" and config["created"] == "1970-01-01T00:00:00Z"
    assert "NVIDIA_REQUIRE_CUDA=cuda>=12.4" in config["config"]["Env"]
    assert config["config"]["Labels"]["dev.lockgen.target"] == "h100"
    checked = check_image(tmp_path / "img", lock)
    expected, got, drift = checked.recorded, checked.recomputed, checked.drift
    assert expected == got and drift.clean
    with pytest.raises(UserError, match="exported from lock"):
        check_image(tmp_path / "img", make_lock(tmp_path, "1.1"))
    raw = subprocess.run(
        [require("skopeo"), "inspect", "--raw", f"oci:{tmp_path / 'img'}:h100-linux-64"],
        capture_output=True,
        check=True,
    ).stdout
    assert "sha256:" + __import__("hashlib").sha256(raw).hexdigest() == digest
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
    assert validated.returncode == 0, validated.stdout + validated.stderr
    bundle = tmp_path / "bundle"
    subprocess.run(
        [require("umoci"), "unpack", "--image", f"{tmp_path / 'img'}:h100-linux-64", str(bundle)],
        check=True,
        capture_output=True,
    )
    placeholder = bundle / "rootfs" / "opt" / "env" / "etc" / "libfoo" / "prefix.txt"
    assert placeholder.read_text() == "installed at /opt/env\n"


def test_a_one_package_change_moves_one_package_layer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old = run_export(make_lock(tmp_path, "1.0"), tmp_path / "old", tmp_path / "home", monkeypatch)
    new = run_export(make_lock(tmp_path, "1.1"), tmp_path / "new", tmp_path / "home", monkeypatch)
    assert old != new
    old_ids = oci_layout.read_image(tmp_path / "old")[1]["rootfs"]["diff_ids"]
    new_ids = oci_layout.read_image(tmp_path / "new")[1]["rootfs"]["diff_ids"]
    assert len(set(old_ids) & set(new_ids)) == 2  # foo-data and cuda-version are shared
    assert len(set(new_ids) - set(old_ids)) == 2  # libfoo's layer, and the rest (the manifest names digests)


def test_tampered_image_and_bad_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lock = make_lock(tmp_path, "1.0")
    run_export(lock, tmp_path / "img", tmp_path / "home", monkeypatch)
    manifest, _, _ = oci_layout.read_image(tmp_path / "img")
    blob = tmp_path / "img" / "blobs" / "sha256" / manifest["layers"][0]["digest"].split(":", 1)[1]
    data = bytearray(blob.read_bytes())
    data[len(data) // 2] ^= 0xFF
    blob.write_bytes(bytes(data))
    with pytest.raises(LockFormatError, match="was changed"):
        check_image(tmp_path / "img")
    blob.unlink()  # a layout copied half: one error line, not a FileNotFoundError
    with pytest.raises(LockFormatError, match="is missing from"):
        check_image(tmp_path / "img")
    tampered = subprocess.run(
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
    assert tampered.returncode != 0
    (tmp_path / "not-a-layout").mkdir()
    (tmp_path / "not-a-layout" / "file").write_text("x")
    with pytest.raises(UserError, match="not an OCI layout"):
        run_export(lock, tmp_path / "not-a-layout", tmp_path / "home", monkeypatch)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".lockgen-export-")]
    with pytest.raises(LockFormatError):
        run_export(tmp_path / "missing.conda-lock.yml", tmp_path / "x", tmp_path / "home", monkeypatch)
    assert not (tmp_path / "x").exists()


def test_a_tag_that_is_no_image_tag_is_a_usage_error(tmp_path: Path) -> None:
    """`--tag` was written into index.json as given (found by an attack battery): `a\nb` could not be pushed and
    `x:y` could not be named as DIR:TAG; the tag grammar of the distribution-spec is checked first."""
    for tag in ("a\nb", "x:y", ".hidden", "t" * 129, "ok\n"):
        done = run_cli("export", str(tmp_path / "any.conda-lock.yml"), "--out", str(tmp_path / "img"), "--tag", tag)
        assert done.returncode == 2 and "is not an image tag" in done.stderr and len(done.stderr.splitlines()) == 2, (
            tag,
            done.stderr,
        )
    assert not (tmp_path / "img").exists()


@pytest.mark.slow
def test_an_environment_is_exported_at_another_path_only_when_it_conforms_there(tmp_path: Path) -> None:
    """export --from-prefix P --image-prefix /opt/env proved the environment at P and wrote an image whose conda
    prefix placeholders name P, which check --image --lock then refused (found by an attack battery): it is
    proven at the path it gets in the image, and refused with what to do."""
    lock, home = make_lock(tmp_path, "1.0"), {"LOCKGEN_HOME": str(tmp_path / "home")}
    assert run_cli("materialize", str(lock), "--prefix", str(tmp_path / "env"), env=home).returncode == 0
    moved = run_cli(
        "export",
        str(lock),
        "--from-prefix",
        str(tmp_path / "env"),
        "--image-prefix",
        "/opt/env",
        "--out",
        str(tmp_path / "moved"),
        env=home,
    )
    assert (
        moved.returncode == 1
        and f"is not the environment of {lock} at /opt/env: cuda-version 12.4: modified etc/cuda-version/prefix.txt"
        in moved.stderr
    ), moved.stderr
    assert (
        "hint: files an install patches name the path it was installed at" in moved.stderr
        and not (tmp_path / "moved").exists()
    )
    kept = run_cli(
        "export", str(lock), "--from-prefix", str(tmp_path / "env"), "--out", str(tmp_path / "kept"), env=home
    )
    assert kept.returncode == 0, kept.stderr
    assert run_cli("check", "--image", str(tmp_path / "kept"), "--lock", str(lock), env=home).returncode == 0


@pytest.mark.slow
def test_an_out_that_is_a_link_or_inside_the_environment_is_one_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both ended in exit 3 (found by an attack battery): a link to a layout was built into, then rmtree refused
    it; an --out inside the --from-prefix environment copied the environment into itself until ENAMETOOLONG."""
    lock = make_lock(tmp_path, "1.0")
    digest = run_export(lock, tmp_path / "real", tmp_path / "home", monkeypatch)
    (tmp_path / "link").symlink_to("real")
    environment = tmp_path / "env"
    (environment / "lib").mkdir(parents=True)
    home = {"LOCKGEN_HOME": str(tmp_path / "home")}
    for command, said in (
        (["--out", str(tmp_path / "link")], f"`{tmp_path / 'link'}` is a symbolic link"),
        (
            ["--from-prefix", str(environment), "--out", str(environment / "img")],
            f"--out {environment / 'img'} is inside the environment being exported",
        ),
    ):
        done = run_cli("export", str(lock), *command, env=home)
        assert (
            done.returncode == 1 and said in done.stderr and "hint:" in done.stderr and "Traceback" not in done.stderr
        ), done.stderr
    assert sorted(p.name for p in environment.rglob("*")) == ["lib"]
    assert (tmp_path / "link").is_symlink() and oci_layout.read_image(tmp_path / "real")[2] == digest
    again = run_export(lock, tmp_path / "real", tmp_path / "home", monkeypatch)  # an existing layout is replaced whole
    assert again == digest and not [p for p in tmp_path.iterdir() if p.name.startswith(".lockgen-export-")]


def test_layer_cache_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lock = make_lock(tmp_path, "1.0")
    messages: list[str] = []
    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    export(ExportRequest(lock, tmp_path / "one"), messages.append)
    export(ExportRequest(lock, tmp_path / "two"), messages.append)
    assert any("3 taken from the layer cache" in m or "4 taken from the layer cache" in m for m in messages)
    assert json.loads((tmp_path / "one" / "index.json").read_text()) == json.loads(
        (tmp_path / "two" / "index.json").read_text()
    )
    # cached blobs are hard-linked into layouts: a blob changed in place in one must not reach the next
    manifest, _, _ = oci_layout.read_image(tmp_path / "two")
    blob = tmp_path / "two" / "blobs" / "sha256" / manifest["layers"][0]["digest"].split(":", 1)[1]
    with blob.open("r+b") as stream:
        stream.write(b"tampered")
    export(ExportRequest(lock, tmp_path / "three"), messages.append)
    assert oci_layout.read_image(tmp_path / "three")[2] == oci_layout.read_image(tmp_path / "one")[2]
    assert check_image(tmp_path / "three", lock).drift.clean


@pytest.fixture
def registry_url(tmp_path: Path):
    """Debian's distribution registry on 127.0.0.1, port picked by the registry, stopped after the test."""
    with loopback_registry(tmp_path) as url:
        yield url


@pytest.mark.slow
def test_push_and_pull_back_keep_the_digest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, registry_url: str) -> None:
    lock = make_lock(tmp_path, "1.0")
    digest = run_export(lock, tmp_path / "img", tmp_path / "home", monkeypatch)
    pushed = run_cli("push", str(tmp_path / "img"), f"docker://{registry_url}/team/img:sm90", "--insecure")
    assert pushed.returncode == 0, pushed.stderr
    assert pushed.stdout.strip() == digest
    subprocess.run(
        [
            require("skopeo"),
            "copy",
            "--src-tls-verify=false",
            f"docker://{registry_url}/team/img:sm90",
            f"oci:{tmp_path / 'pulled'}:back",
        ],
        check=True,
        capture_output=True,
    )
    assert json.loads((tmp_path / "pulled" / "index.json").read_text())["manifests"][0]["digest"] == digest
    checked = run_cli("check", "--image", f"docker://{registry_url}/team/img:sm90", "--insecure", "--lock", str(lock))
    assert checked.returncode == 0, checked.stderr
    missing = run_cli("check", "--image", f"docker://{registry_url}/team/none:x", "--insecure")
    assert (
        missing.returncode == 1 and "error: pulling docker://" in missing.stderr and "Traceback" not in missing.stderr
    )
    refused = run_cli("push", str(tmp_path / "img"), "docker://127.0.0.1:9/team/img:x", "--insecure")
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert refused.stderr.splitlines()[0].startswith("pushing 4 layers (")  # progress, then the one error line
    assert refused.stderr.splitlines()[1].startswith("error: pushing to")


@pytest.mark.slow
def test_the_image_runs_daemonless_as_a_non_root_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """umoci unpack + runc run (the daemonless path): a static program from the environment reads a
    file of another package and prints its user id."""
    source = tmp_path / "hello.c"
    source.write_text(
        "#include <stdio.h>\n#include <unistd.h>\nint main(void){char l[256]={0};"
        'FILE*f=fopen("/opt/env/share/greeting/message.txt","r");if(f){fgets(l,sizeof l,f);fclose(f);}'
        'printf("uid=%d %s",(int)getuid(),l);return 0;}\n'
    )
    subprocess.run([require("gcc"), "-static", "-O2", "-o", str(tmp_path / "hello"), str(source)], check=True)
    channel = build_channel(
        tmp_path / "channel",
        [
            Pkg("hello", "1.0", files={"bin/hello": (tmp_path / "hello").read_bytes()}, depends=("greeting",)),
            Pkg("greeting", "1.0", subdir="noarch", files={"share/greeting/message.txt": "hello from the lock\n"}),
        ],
    )
    stack = tmp_path / "stack" / "stack.toml"
    stack.parent.mkdir()
    stack.write_text(
        f'[stack]\nname = "run"\nchannels = ["{channel.as_uri()}"]\n[dependencies]\nhello = '
        '"*"\n[targets.cpu]\narch = "cpu"\n'
    )
    api.resolve(stack)
    run_export(stack.parent / "locks" / "cpu.conda-lock.yml", tmp_path / "img", tmp_path / "home", monkeypatch)
    bundle = tmp_path / "bundle"
    subprocess.run(
        [require("umoci"), "unpack", "--image", f"{tmp_path / 'img'}:cpu-linux-64", str(bundle)],
        check=True,
        capture_output=True,
    )
    config = json.loads((bundle / "config.json").read_text())
    config["process"]["terminal"] = False
    config["process"]["args"] = ["/opt/env/bin/hello"]
    (bundle / "config.json").write_text(json.dumps(config))
    ran = subprocess.run(
        [require("runc"), "run", "-b", str(bundle), f"lockgen-test-{os.getpid()}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "uid=1000 hello from the lock\n"
    # and through podman, from a per-test store
    podman = podman_run(tmp_path / "img", "cpu-linux-64", "/opt/env/bin/hello")
    assert podman.returncode == 0, podman.stderr
    assert podman.stdout == "uid=1000 hello from the lock\n"


@pytest.mark.slow
def test_an_edited_sbom_beside_or_inside_an_image_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lock = make_lock(tmp_path, "1.0")
    run_export(lock, tmp_path / "img", tmp_path / "home", monkeypatch)
    assert check_image(tmp_path / "img").drift.clean and check_lock(lock, Image(str(tmp_path / "img"))).clean
    beside = tmp_path / "img" / "sbom.cdx.json"
    data = beside.read_bytes()
    beside.write_bytes(data.replace(b"libfoo", b"libfoO", 1))  # one byte, same size
    drift = check_image(tmp_path / "img").drift
    assert drift.modified == [f"{beside} (differs from the image's SBOM)"]
    result = check_lock(lock, Image(str(tmp_path / "img")))
    assert not result.clean and result.problems == (f"image: {beside} (differs from the image's SBOM and the lock's)",)
    beside.write_bytes(data)
    other = make_lock(tmp_path / "other", "1.1")  # an SBOM that is some other lock's, stated for this image
    image_env = check_image(tmp_path / "img").recorded
    beside.write_bytes(canonical_json(cyclonedx(load_lock(other), "linux-64", file_digest(other), image_env)))
    assert not check_lock(lock, Image(str(tmp_path / "img"))).clean


@pytest.mark.slow
def test_sbom_base_image_and_archive_formats(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = tmp_path / "base"  # a base without an environment of lockgen's (a lockgen image of another lock is refused)
    umoci = require("umoci")
    subprocess.run([umoci, "init", "--layout", str(base)], check=True, capture_output=True)
    subprocess.run([umoci, "new", "--image", f"{base}:latest"], check=True, capture_output=True)
    (tmp_path / "os-release").write_text("ID=base\n")
    subprocess.run(
        [umoci, "insert", "--image", f"{base}:latest", str(tmp_path / "os-release"), "/etc/os-release"],
        check=True,
        capture_output=True,
    )
    base_manifest, _, base_digest = oci_layout.read_image(base)
    assert len(base_manifest["layers"]) == 1
    lock = make_lock(tmp_path, "1.0")
    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    export(ExportRequest(lock, tmp_path / "img", base=tmp_path / "base"), lambda _: None)
    manifest, _, _ = oci_layout.read_image(tmp_path / "img")
    assert manifest["layers"][: len(base_manifest["layers"])] == base_manifest["layers"]
    assert manifest["annotations"]["org.opencontainers.image.base.digest"] == base_digest
    sbom = json.loads((tmp_path / "img" / "sbom.cdx.json").read_text())
    assert sbom["bomFormat"] == "CycloneDX" and {c["name"] for c in sbom["components"]} >= {"libfoo", "foo-data"}
    assert all(c["purl"].startswith("pkg:conda/") and c["hashes"] for c in sbom["components"])
    archives = []
    for run in ("one", "two"):
        monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / f"home-{run}"))
        for fmt in ("oci-archive", "docker-archive"):
            out = tmp_path / f"{run}.{fmt}.tar"
            export(ExportRequest(lock, out, fmt=fmt), lambda _: None)
            archives.append(out.read_bytes())
    assert archives[0] == archives[2] and archives[1] == archives[3]
    inspected = subprocess.run(
        [require("skopeo"), "inspect", f"oci-archive:{tmp_path / 'one.oci-archive.tar'}"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(inspected.stdout)["Labels"]["dev.lockgen.target"] == "h100"


def test_two_targets_share_the_layers_of_their_common_packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    h100 = make_lock(tmp_path, "1.0")
    stack = h100.parent.parent / "stack.toml"
    stack.write_text(stack.read_text() + '[targets.b200]\narch = "sm90"\ndriver = "580.65.06"\n')
    api.resolve(stack)
    second = h100.parent / "b200.conda-lock.yml"  # an H200 fleet on a newer driver: the same packages
    run_export(h100, tmp_path / "h100", tmp_path / "home", monkeypatch)
    run_export(second, tmp_path / "b200", tmp_path / "home", monkeypatch)
    ids = [oci_layout.read_image(tmp_path / name)[1]["rootfs"]["diff_ids"] for name in ("h100", "b200")]
    assert ids[0][:-1] == ids[1][:-1]  # every package layer is shared
    assert ids[0][-1] != ids[1][-1]  # the last layer names each target's lock


def test_a_layout_that_cannot_be_put_in_place_leaves_the_old_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The old layout is set aside while the new one is renamed into its place: a failed rename put it back (a
    review found the set-aside copy removed with the work folder, so nothing was left at --out)."""
    from lockgen.adapters.image import image_tree

    out, work = tmp_path / "img", tmp_path / "work"
    (out / "blobs").mkdir(parents=True)
    (out / "oci-layout").write_text("old")
    (work / "layout").mkdir(parents=True)
    (work / "layout" / "oci-layout").write_text("new")
    real = os.rename

    def refused(source: object, target: object) -> None:
        if Path(str(source)) == work / "layout":
            raise OSError(28, "No space left on device")
        real(source, target)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "rename", refused)
    with pytest.raises(OSError):
        image_tree.place(work / "layout", work, out, "oci-layout", {})
    assert (out / "oci-layout").read_text() == "old" and not (work / "replaced").exists()
