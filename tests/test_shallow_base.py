"""`export --base docker://…` (shallow) against two real loopback `docker-registry`s: what the base registry
served is counted from its access log, so "no base layer was downloaded" is what the registry saw. The
export reads the base's manifest and config only; the layout lacks the base's blobs and records where they
live; it is byte for byte the export on a local copy of the base; push mounts them (same registry) or
streams them (another); the pushed image is complete for skopeo and `check --image --lock`; an image index
gives the lock's platform's image; bad input is one `error:` line."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import socket
import subprocess
import tarfile
import urllib.parse
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lockgen.api.steps import base_steps
from lockgen.core.image.image_platform import choose_manifest
from lockgen.errors import LockgenError
from lockgen.model.base_image import RegistryBase
from tests.conftest import loopback_registry, run_cli
from tests.test_export import make_lock, require

MANIFEST, INDEX = "application/vnd.oci.image.manifest.v1+json", "application/vnd.oci.image.index.v1+json"
ACCESS = re.compile(r'"(GET|HEAD|POST|PUT|DELETE) (\S+) HTTP/1\.1" (\d+)')


def canonical(document: dict) -> bytes:
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def base_layout(folder: Path, platforms: dict[str, list[dict[str, bytes | str]]], tag: str = "base") -> Path:
    """An OCI layout written here from the image-spec (not by lockgen): per architecture an image of these
    layers (path -> content, or a symbolic link's target as text), one image or, for several architectures, an
    image index of them."""
    blobs = folder / "blobs" / "sha256"
    blobs.mkdir(parents=True)

    def put(data: bytes) -> dict:
        digest = hashlib.sha256(data).hexdigest()
        (blobs / digest).write_bytes(data)
        return {"digest": f"sha256:{digest}", "size": len(data)}

    images = []
    for architecture, layers in platforms.items():
        descriptors, diff_ids = [], []
        for files in layers:
            raw = io.BytesIO()
            with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
                for path, content in sorted(files.items()):
                    info = tarfile.TarInfo(path)
                    if isinstance(content, str):
                        info.type, info.linkname = tarfile.SYMTYPE, content
                        tar.addfile(info)
                        continue
                    info.size, info.mode = len(content), 0o755
                    tar.addfile(info, io.BytesIO(content))
            diff_ids.append("sha256:" + hashlib.sha256(raw.getvalue()).hexdigest())
            descriptors.append(
                {
                    "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                    **put(gzip.compress(raw.getvalue(), mtime=0)),
                }
            )
        config = {
            "architecture": architecture,
            "os": "linux",
            "config": {"Env": ["PATH=/usr/bin:/bin"]},
            "rootfs": {"type": "layers", "diff_ids": diff_ids},
        }
        manifest = {
            "schemaVersion": 2,
            "mediaType": MANIFEST,
            "layers": descriptors,
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **put(canonical(config))},
        }
        images.append(
            {
                "mediaType": MANIFEST,
                **put(canonical(manifest)),
                "platform": {"architecture": architecture, "os": "linux"},
            }
        )
    if len(images) == 1:
        top = {k: v for k, v in images[0].items() if k != "platform"}
    else:
        top = {"mediaType": INDEX, **put(canonical({"schemaVersion": 2, "mediaType": INDEX, "manifests": images}))}
    top["annotations"] = {"org.opencontainers.image.ref.name": tag}
    (folder / "index.json").write_bytes(canonical({"schemaVersion": 2, "mediaType": INDEX, "manifests": [top]}))
    (folder / "oci-layout").write_bytes(b'{"imageLayoutVersion":"1.0.0"}')
    return folder


def skopeo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([require("skopeo"), *args], capture_output=True, text=True, timeout=120)


def upload(layout: Path, tag: str, reference: str) -> str:
    """`skopeo copy --all` of the layout into the registry; the digest the registry holds."""
    digest_file = layout.parent / f"{layout.name}.digest"
    copied = skopeo(
        "copy", "--all", "--dest-tls-verify=false", "--digestfile", str(digest_file), f"oci:{layout}:{tag}", reference
    )
    assert copied.returncode == 0, copied.stderr
    return digest_file.read_text().strip()


class AccessLog:
    """The registry's access log, read from a mark: (method, unquoted path and query, status) per request."""

    def __init__(self, path: Path) -> None:
        self.path, self.mark = path, 0

    def since(self) -> list[tuple[str, str, int]]:
        text = self.path.read_text()[self.mark :]
        return [(m, urllib.parse.unquote(uri), int(s)) for m, uri, s in ACCESS.findall(text)]

    def reset(self) -> None:
        self.mark = len(self.path.read_text())

    def blob_gets(self, repository: str) -> set[str]:
        prefix = f"/v2/{repository}/blobs/"
        return {
            uri.removeprefix(prefix)
            for method, uri, status in self.since()
            if method == "GET" and uri.startswith(prefix) and status == 200
        }


def layers_of(layout: Path, digest: str) -> list[str]:
    manifest = json.loads((layout / "blobs" / "sha256" / digest.split(":")[1]).read_bytes())
    return [layer["digest"] for layer in manifest["layers"]]


def export(lock: Path, out: Path, home: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_cli("export", str(lock), "--out", str(out), *extra, env={"LOCKGEN_HOME": str(home)})


def one_line_error(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1 and any(line.startswith("hint:") for line in lines), done.stderr
    assert "Traceback" not in done.stderr and all(w in errors[0] for w in words), done.stderr


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory):
    """Registry A with a two-layer base (platform/base:1), registry B empty, and a conda lock."""
    folder = tmp_path_factory.mktemp("shallow")
    (folder / "a").mkdir()
    (folder / "b").mkdir()
    with loopback_registry(folder / "a") as a, loopback_registry(folder / "b") as b:
        base = base_layout(
            folder / "base",
            {"amd64": [{"etc/os-release": b"ID=base\n"}, {"usr/share/big.bin": bytes(range(256)) * 4096}]},
        )
        digest = upload(base, "base", f"docker://{a}/platform/base:1")
        yield {
            "a": a,
            "b": b,
            "folder": folder,
            "digest": digest,
            "base": base,
            "log": AccessLog(folder / "a" / "registry.log"),
            "log_b": AccessLog(folder / "b" / "registry.log"),
            "lock": make_lock(folder, "1.0"),
        }


@pytest.fixture(scope="module")
def shallow(world) -> tuple[Path, str]:
    """The lock exported on docker://A/platform/base@DIGEST: (layout, manifest digest)."""
    world["log"].reset()
    out = world["folder"] / "shallow-img"
    done = export(
        world["lock"],
        out,
        world["folder"] / "home-1",
        "--base",
        f"docker://{world['a']}/platform/base@{world['digest']}",
        "--insecure",
    )
    assert done.returncode == 0, done.stderr
    return out, done.stdout.strip()


@pytest.mark.slow
def test_a_shallow_export_reads_the_manifest_and_config_only(world, shallow) -> None:
    out, digest = shallow
    base_layers = layers_of(world["base"], world["digest"])
    fetched = world["log"].blob_gets("platform/base")
    assert len(fetched) == 1 and not fetched & set(base_layers)  # the config blob only: no layer downloaded
    assert layers_of(out, digest)[:2] == base_layers
    assert not any((out / "blobs" / "sha256" / d.split(":")[1]).exists() for d in base_layers)  # referenced, not held
    manifest = json.loads((out / "blobs" / "sha256" / digest.split(":")[1]).read_bytes())
    assert manifest["annotations"] == {"org.opencontainers.image.base.digest": world["digest"]}
    entry = json.loads((out / "index.json").read_text())["manifests"][0]
    assert entry["annotations"]["org.opencontainers.image.base.name"] == f"{world['a']}/platform/base@{world['digest']}"
    # reproducible: another folder and home; a tag resolved to the same digest; a local copy of the base
    again = export(
        world["lock"],
        world["folder"] / "again",
        world["folder"] / "home-2",
        "--base",
        f"docker://{world['a']}/platform/base:1",
        "--insecure",
    )
    assert again.returncode == 0 and again.stdout.strip() == digest, again.stderr
    assert f"platform/base@{world['digest']}" in again.stderr  # the tag's digest, said
    copy = skopeo(
        "copy",
        "--src-tls-verify=false",
        f"docker://{world['a']}/platform/base@{world['digest']}",
        f"oci:{world['folder'] / 'base-copy'}:copied",
    )
    assert copy.returncode == 0, copy.stderr
    local = export(
        world["lock"],
        world["folder"] / "local",
        world["folder"] / "home-3",
        "--base",
        str(world["folder"] / "base-copy"),
    )
    assert local.returncode == 0 and local.stdout.strip() == digest, local.stderr


@pytest.mark.slow
def test_commands_that_need_every_blob_refuse_a_shallow_layout(world, shallow) -> None:
    out, _ = shallow
    one_line_error(run_cli("check", "--image", str(out), "--lock", str(world["lock"])), "shallow", "platform/base@")
    archive = export(
        world["lock"],
        world["folder"] / "img.tar",
        world["folder"] / "home-1",
        "--format",
        "oci-archive",
        "--base",
        f"docker://{world['a']}/platform/base@{world['digest']}",
        "--insecure",
    )
    one_line_error(archive, "oci-archive")
    assert not (world["folder"] / "img.tar").exists()


@pytest.mark.slow
def test_push_mounts_on_the_base_s_registry_and_streams_to_another(world, shallow) -> None:
    out, digest = shallow
    base_layers = layers_of(world["base"], world["digest"])
    world["log"].reset()
    target = f"docker://{world['a']}/team/img:1"
    pushed = run_cli("push", str(out), target, "--insecure")
    assert pushed.returncode == 0 and pushed.stdout.strip() == digest, pushed.stderr
    requests = world["log"].since()
    mounts = {uri for method, uri, status in requests if method == "POST" and "mount=" in uri and status == 201}
    assert {urllib.parse.parse_qs(urllib.parse.urlsplit(u).query)["mount"][0] for u in mounts} == set(base_layers)
    assert not world["log"].blob_gets("platform/base")  # mounted registry-side, never read
    inspected = skopeo("inspect", "--tls-verify=false", target)
    assert inspected.returncode == 0 and json.loads(inspected.stdout)["Digest"] == digest, inspected.stderr
    checked = run_cli("check", "--image", target, "--lock", str(world["lock"]), "--insecure")
    assert checked.returncode == 0, checked.stdout + checked.stderr

    world["log"].reset()
    other = f"docker://{world['b']}/team/img:1"
    streamed = run_cli("push", str(out), other, "--insecure")
    assert streamed.returncode == 0 and streamed.stdout.strip() == digest, streamed.stderr
    assert world["log"].blob_gets("platform/base") == set(base_layers)  # each streamed from A once
    assert "streaming base blob" in streamed.stderr
    copied = skopeo("copy", "--src-tls-verify=false", other, f"oci:{world['folder'] / 'from-b'}:img")
    assert copied.returncode == 0, copied.stderr
    checked = run_cli("check", "--image", other, "--lock", str(world["lock"]), "--insecure")
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.slow
def test_a_base_index_gives_the_lock_s_platform(world) -> None:
    folder = world["folder"]
    multi = base_layout(
        folder / "multi",
        {"arm64": [{"etc/os-release": b"ID=arm\n"}], "amd64": [{"etc/os-release": b"ID=amd\n"}]},
        "multi",
    )
    upload(multi, "multi", f"docker://{world['a']}/platform/multi:1")
    index = json.loads((multi / "index.json").read_text())["manifests"][0]["digest"]
    amd64 = next(
        e["digest"]
        for e in json.loads((multi / "blobs" / "sha256" / index.split(":")[1]).read_bytes())["manifests"]
        if e["platform"]["architecture"] == "amd64"
    )
    remote = export(
        world["lock"],
        folder / "on-multi",
        folder / "home-1",
        "--base",
        f"docker://{world['a']}/platform/multi:1",
        "--insecure",
    )
    assert remote.returncode == 0, remote.stderr
    manifest = json.loads((folder / "on-multi" / "blobs" / "sha256" / remote.stdout.strip().split(":")[1]).read_bytes())
    assert manifest["annotations"]["org.opencontainers.image.base.digest"] == amd64  # the linux-64 lock's image
    local = export(world["lock"], folder / "on-multi-local", folder / "home-1", "--base", str(multi))
    assert local.returncode == 0 and local.stdout.strip() == remote.stdout.strip(), local.stderr

    foreign = base_layout(folder / "foreign", {"arm64": [{"a": b"a"}], "ppc64le": [{"b": b"b"}]}, "foreign")
    upload(foreign, "foreign", f"docker://{world['a']}/platform/foreign:1")
    one_line_error(
        export(
            world["lock"],
            folder / "x",
            folder / "home-1",
            "--base",
            f"docker://{world['a']}/platform/foreign:1",
            "--insecure",
        ),
        "no linux/amd64",
        "linux/arm64",
    )
    one_line_error(export(world["lock"], folder / "x", folder / "home-1", "--base", str(foreign)), "no linux/amd64")


@pytest.mark.slow
def test_bad_bases_are_one_line_errors(world) -> None:
    folder, lock = world["folder"], world["lock"]
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        down = probe.getsockname()[1]
    cases = [
        (f"docker://127.0.0.1:{down}/platform/base@{world['digest']}", "cannot reach the registry"),
        (f"docker://{world['a']}/platform/absent:1", "no image"),
        (f"docker://{world['a']}/Platform/Base:1", "not a repository name"),
        (f"docker://user:secret@{world['a']}/platform/base:1", "credentials"),
    ]
    for reference, words in cases:
        done = export(lock, folder / "bad", folder / "home-1", "--base", reference, "--insecure")
        one_line_error(done, words)
        assert "secret" not in done.stderr and not (folder / "bad").exists()


def test_a_pure_pypi_lock_s_python_is_found_reading_layers_top_down(world) -> None:
    folder = world["folder"]
    python = base_layout(
        folder / "python",
        {"amd64": [{"usr/bin/python3.12": b"lower"}, {"usr/local/bin/python3.12": b"upper"}, {"etc/motd": b"top\n"}]},
        "py",
    )
    digest = upload(python, "py", f"docker://{world['a']}/platform/python:1")
    layers, said = layers_of(python, digest), []
    world["log"].reset()
    base = RegistryBase(reference=f"docker://{world['a']}/platform/python@{digest}", insecure=True)
    wanted = ["/usr/local/bin/python3.12", "/usr/bin/python3.12"]
    assert base_steps.base_file(base, "linux-64", wanted, said.append) == "/usr/local/bin/python3.12"
    assert world["log"].blob_gets("platform/python") & set(layers) == set(layers[1:])  # the top two: not the lowest
    assert sum("reading base layer" in line for line in said) == 2
    assert (
        base_steps.base_file(base, "linux-64", ["/usr/local/bin/python3.11", "/usr/bin/python3.11"], said.append)
        is None
    )
    assert (
        base_steps.base_file(python, "linux-64", wanted, said.append) == "/usr/local/bin/python3.12"
    )  # a local layout: same


PLATFORM = st.fixed_dictionaries(
    {},
    optional={
        "os": st.sampled_from(["linux", "windows", ""]),
        "architecture": st.sampled_from(["amd64", "arm64", "ppc64le", 7]),
        "variant": st.sampled_from(["v8", "v7", "", None]),
    },
)
ENTRY = st.fixed_dictionaries(
    {},
    optional={
        "digest": st.sampled_from(["sha256:" + "a" * 64, "sha256:x", 3, None]),
        "platform": PLATFORM | st.text(max_size=3) | st.none(),
    },
)
DOCUMENT = (
    st.fixed_dictionaries({}, optional={"manifests": st.lists(ENTRY | st.integers(), max_size=5) | st.text()})
    | st.lists(st.integers(), max_size=2)
    | st.none()
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(DOCUMENT, st.sampled_from(["amd64", "arm64"]))
def test_choosing_a_platform_from_any_index_is_an_entry_of_it_or_one_error(index, architecture: str) -> None:
    try:
        entry = choose_manifest(index, architecture, "the index")
    except LockgenError as error:
        assert "\n" not in error.message and error.hint
        return
    assert entry in index["manifests"] and entry["platform"]["os"] == "linux"
    assert entry["platform"]["architecture"] == architecture and entry["digest"] == "sha256:" + "a" * 64
    plain = [
        e
        for e in index["manifests"]
        if isinstance(e, dict)
        and isinstance(e.get("platform"), dict)
        and e["platform"].get("os") == "linux"
        and e["platform"].get("architecture") == architecture
        and e["platform"].get("variant") in (None, "", "v8")
    ]
    assert not plain or entry["platform"].get("variant") in (None, "", "v8")  # the plainest variant first
