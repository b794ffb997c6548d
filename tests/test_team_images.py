"""A team image on its certified base: exported with `--base` of the base's own image, it is the base's layers
unchanged (same digests, same order, blobs not re-tarred or re-compressed) plus layers for the team's
packages only, and it is still exactly the team lock's environment; on the base in a registry (shallow),
it is the same image, byte for byte, as on a local copy of that base."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from lockgen.adapters.image import oci_layout
from tests.channel_factory import Pkg, build_channel
from tests.conftest import loopback_registry, run_cli
from tests.python_base import python_base
from tests.test_export import require
from tests.test_team_stacks import team, write

BASE = [
    Pkg("libtorchish", "1.0", files={"lib/libtorchish.so": "x" * 200_000}),
    Pkg("tok", "0.21.4"),
    Pkg("base-lib", "1.0", depends=("tok", "libtorchish"), files={"bin/base-tool": "#!/bin/sh\necho base\n"}),
]
TEAM = [
    Pkg("teamtool", "1.0", files={"share/teamtool/data.txt": "team\n"}),
    Pkg("tok", "0.22.1"),
    Pkg("trans", "1.0", depends=("tok >=0.22",)),
]


def export(lock: Path, out: Path, *extra: str) -> str:
    done = run_cli("export", str(lock), "--out", str(out), *extra)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[0]


@pytest.fixture
def base_image(tmp_path: Path) -> tuple[Path, Path]:
    """(the base stack, its exported image)."""
    channel = build_channel(tmp_path / "channel", BASE)
    base = write(
        tmp_path / "platform" / "stack.toml",
        f'[stack]\nname = "platform"\nchannels = ["{channel.as_uri()}"]\n[dependencies]\nbase-lib = '
        '"*"\n[targets.cpu]\narch = "cpu"\n',
    )
    assert run_cli("resolve", str(base)).returncode == 0
    export(base.parent / "locks" / "cpu.conda-lock.yml", tmp_path / "base-img")
    build_channel(channel, BASE + TEAM)
    return base, tmp_path / "base-img"


def resolved_team_lock(tmp_path: Path) -> Path:
    """The lock of a team stack adding `teamtool` to the base, resolved."""
    stack = team(tmp_path, 'teamtool = "*"')
    assert run_cli("resolve", str(stack)).returncode == 0
    return stack.parent / "locks" / "cpu.conda-lock.yml"


def layer_digests(layout: Path) -> list[str]:
    manifest, _, _ = oci_layout.read_image(layout)
    return [layer["digest"] for layer in manifest["layers"]]


@pytest.mark.slow
def test_a_team_image_is_the_base_image_plus_the_team_s_layers(tmp_path: Path, base_image: tuple[Path, Path]) -> None:
    _, base_layout = base_image
    lock = resolved_team_lock(tmp_path)
    digest = export(lock, tmp_path / "team-img", "--base", str(base_layout))
    base_layers, team_layers = layer_digests(base_layout), layer_digests(tmp_path / "team-img")
    assert team_layers[: len(base_layers)] == base_layers  # every base layer, byte for byte, in order
    assert len(team_layers) - len(base_layers) == 2  # teamtool's layer, and the last (the records, the manifest)
    for blob in base_layers:  # the blob itself, not a re-compressed copy
        name = blob.split(":", 1)[1]
        assert (tmp_path / "team-img" / "blobs" / "sha256" / name).read_bytes() == (
            base_layout / "blobs" / "sha256" / name
        ).read_bytes()
    checked = run_cli("check", "--image", str(tmp_path / "team-img"), "--lock", str(lock))
    assert checked.returncode == 0, checked.stdout + checked.stderr  # the union is the team lock's environment
    assert run_cli("check", "--image", str(tmp_path / "team-img")).returncode == 0
    _, config, _ = oci_layout.read_image(tmp_path / "team-img")
    assert config["config"]["Env"][0].count("/opt/env/bin") == 1
    assert export(lock, tmp_path / "again", "--base", str(base_layout)) == digest  # reproducible


@pytest.mark.slow
def test_only_the_team_lock_s_own_base_image_is_reused(tmp_path: Path, base_image: tuple[Path, Path]) -> None:
    base, base_layout = base_image
    moved = team(tmp_path / "a", 'trans = "*"', "override = true")
    moved.parent.parent.joinpath("platform").symlink_to(base.parent)
    assert run_cli("resolve", str(moved)).returncode == 0
    refused = run_cli(
        "export",
        str(moved.parent / "locks" / "cpu.conda-lock.yml"),
        "--out",
        str(tmp_path / "x"),
        "--base",
        str(base_layout),
    )
    assert (
        refused.returncode == 1 and "moved base packages (override)" in refused.stderr and not (tmp_path / "x").exists()
    )
    alone = run_cli(
        "export",
        str(base.parent / "locks" / "cpu.conda-lock.yml"),
        "--out",
        str(tmp_path / "y"),
        "--base",
        str(base_layout),
    )  # a lock that extends no base, on a lockgen image at /opt/env
    assert alone.returncode == 1 and "this lock extends no base" in alone.stderr, alone.stderr


def environment_digest(layout: Path) -> str:
    _, config, _ = oci_layout.read_image(layout)
    return config["config"]["Labels"]["dev.lockgen.environment.digest"]


@pytest.mark.slow
def test_the_team_image_on_its_base_is_the_environment_built_whole(
    tmp_path: Path, base_image: tuple[Path, Path]
) -> None:
    """The held packages are not linked or hashed again (the base image's records and manifest stand in for
    them), yet the environment digest is the one of the whole team environment built from scratch."""
    _, base_layout = base_image
    lock = resolved_team_lock(tmp_path)
    done = run_cli("export", str(lock), "--out", str(tmp_path / "on-base"), "--base", str(base_layout))
    assert done.returncode == 0, done.stderr
    assert (
        "linked 1 conda packages" in done.stderr and "taken as its image records them (3 of 3 packages" in done.stderr
    )
    export(lock, tmp_path / "whole")  # every package built, no base
    assert environment_digest(tmp_path / "on-base") == environment_digest(tmp_path / "whole")


def _forged_base(tmp_path: Path, base: Path, base_layout: Path) -> Path:
    """The base image with libtorchish's library replaced and every digest and label recomputed to match."""
    from lockgen.adapters.store import env_manifest
    from lockgen.adapters.lock.lockfile_yaml import load_lock
    from lockgen.api.export import BuiltTree, _write_image
    from lockgen.model.requests import ExportRequest
    from lockgen.digests import file_digest

    root = tmp_path / "unpacked"
    oci_layout.unpack(base_layout, root)
    tree = root / "opt" / "env"
    (tree / "lib" / "libtorchish.so").write_text("owned\n")
    manifest, _ = env_manifest.build(tree)
    lock = base.parent / "locks" / "cpu.conda-lock.yml"
    env_manifest.write(
        tree,
        manifest,
        {},
        {
            "environment_digest": env_manifest.digest(manifest),
            "lock_sha256": file_digest(lock),
            "platform": "linux-64",
            "prefix": "/opt/env",
        },
    )
    (tree / env_manifest.STATS).unlink()
    _write_image(
        BuiltTree(load_lock(lock), "linux-64", file_digest(lock), env_manifest.digest(manifest), tree, "/opt/env"),
        tmp_path / "work",
        ExportRequest(lock, tmp_path / "forged"),
        lambda _: None,
    )
    return tmp_path / "forged"


@pytest.mark.slow
def test_a_forged_base_is_refused_or_caught(tmp_path: Path, base_image: tuple[Path, Path]) -> None:
    base, base_layout = base_image
    (tmp_path / "work").mkdir()
    forged = _forged_base(tmp_path, base, base_layout)
    lock = resolved_team_lock(tmp_path)
    # the base's packages' own manifests are known here (the base was exported in this home): refused
    refused = run_cli("export", str(lock), "--out", str(tmp_path / "x"), "--base", str(forged))
    assert refused.returncode == 1 and "records lib/libtorchish.so of libtorchish 1.0" in refused.stderr, refused.stderr
    assert not (tmp_path / "x").exists()
    # a machine that never saw the base's packages takes the base as it records itself; the check tells
    fresh = {"LOCKGEN_HOME": str(tmp_path / "fresh-home")}
    made = run_cli("export", str(lock), "--out", str(tmp_path / "y"), "--base", str(forged), env=fresh)
    assert made.returncode == 0 and "(0 of 3 packages also proven" in made.stderr, made.stderr
    checked = run_cli("check", "--image", str(tmp_path / "y"), "--lock", str(lock), env=fresh)
    assert checked.returncode == 1 and "libtorchish 1.0: modified lib/libtorchish.so" in checked.stdout, checked.stdout


@pytest.mark.slow
def test_a_held_build_republished_under_the_same_name_is_refused(tmp_path: Path, base_image: tuple[Path, Path]) -> None:
    """A channel that replaced tok 0.21.4's archive after the base was locked: the team lock pins the new
    archive, which the base image's layers do not hold."""
    _, base_layout = base_image
    republished = [
        Pkg("tok", "0.21.4", files={"share/tok/README": "changed\n"}) if p.name == "tok" else p for p in BASE
    ]
    build_channel(tmp_path / "channel", republished + TEAM[:1])
    refused = run_cli(
        "export", str(resolved_team_lock(tmp_path)), "--out", str(tmp_path / "x"), "--base", str(base_layout)
    )
    assert refused.returncode == 1 and "tok 0.21.4 is another archive than its base lock's" in refused.stderr, (
        refused.stderr
    )


@pytest.mark.slow
def test_a_team_image_on_the_base_in_a_registry_is_the_image_on_a_local_copy(
    tmp_path: Path, base_image: tuple[Path, Path]
) -> None:
    _, base_layout = base_image
    lock = resolved_team_lock(tmp_path)
    (tmp_path / "registry").mkdir()
    with loopback_registry(tmp_path / "registry") as host:
        pushed = run_cli("push", str(base_layout), f"docker://{host}/platform/torch:1", "--insecure")
        assert pushed.returncode == 0, pushed.stderr
        base = f"{host}/platform/torch@{pushed.stdout.strip()}"
        subprocess.run(
            [
                require("skopeo"),
                "copy",
                "--src-tls-verify=false",
                f"docker://{base}",
                f"oci:{tmp_path / 'base-copy'}:copy",
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        on_remote = run_cli(
            "export", str(lock), "--out", str(tmp_path / "team-remote"), "--base", f"docker://{base}", "--insecure"
        )
        assert on_remote.returncode == 0, on_remote.stderr
        assert "linked 1 conda packages" in on_remote.stderr  # the held records read from the registry's layers
        remote = on_remote.stdout.strip().splitlines()[0]
        assert export(lock, tmp_path / "team-local", "--base", str(tmp_path / "base-copy")) == remote
        held = {p.name for p in (tmp_path / "team-remote" / "blobs" / "sha256").iterdir()}
        assert not held & {d.split(":", 1)[1] for d in layer_digests(base_layout)}  # the team's own blobs only
        target = f"docker://{host}/team/nlp:1"
        assert run_cli("push", str(tmp_path / "team-remote"), target, "--insecure").stdout.strip() == remote
        checked = run_cli("check", "--image", target, "--lock", str(lock), "--insecure")
        assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.slow
def test_a_team_image_on_a_base_behind_registry_credentials(tmp_path: Path, base_image: tuple[Path, Path]) -> None:
    """The base read shallow, its held records streamed, and the team image pushed (base layers mounted from
    the base's repository) through a registry that answers 401 without Basic credentials; the credentials
    come from the auth file and show in no output."""
    import base64
    import json
    import threading
    from http.server import ThreadingHTTPServer

    from tests.test_attest import _Gate

    _, base_layout = base_image
    lock = resolved_team_lock(tmp_path)
    (tmp_path / "registry").mkdir()
    with loopback_registry(tmp_path / "registry") as host:
        pushed = run_cli("push", str(base_layout), f"docker://{host}/platform/torch:1", "--insecure")
        assert pushed.returncode == 0, pushed.stderr
        gate = type("Gate", (_Gate,), {"upstream": host, "scheme": "basic", "seen_authorization": []})
        server = ThreadingHTTPServer(("127.0.0.1", 0), gate)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        front = f"127.0.0.1:{server.server_address[1]}"
        auth = tmp_path / "auth.json"
        auth.write_text(json.dumps({"auths": {front: {"auth": base64.b64encode(b"robot:s3cret-pass").decode()}}}))
        env = {"REGISTRY_AUTH_FILE": str(auth), "HOME": str(tmp_path / "h"), "XDG_RUNTIME_DIR": str(tmp_path / "run")}
        try:
            base = f"docker://{front}/platform/torch@{pushed.stdout.strip()}"
            refused = run_cli(
                "export",
                str(lock),
                "--base",
                base,
                "--insecure",
                "--out",
                str(tmp_path / "x"),
                env={**env, "REGISTRY_AUTH_FILE": str(tmp_path / "none.json")},
            )
            assert refused.returncode == 1 and "401" in refused.stderr, refused.stderr
            exported = run_cli(
                "export", str(lock), "--base", base, "--insecure", "--out", str(tmp_path / "team-img"), env=env
            )
            assert exported.returncode == 0 and "linked 1 conda packages" in exported.stderr, exported.stderr
            target = f"docker://{front}/team/nlp:1"
            pushed_team = run_cli("push", str(tmp_path / "team-img"), target, "--insecure", env=env)
            assert pushed_team.returncode == 0, pushed_team.stderr
            # proven from the registry behind the front (skopeo's own credential handling is skopeo's; this
            # front forwards one Accept header of the several skopeo sends)
            checked = run_cli("check", "--image", f"docker://{host}/team/nlp:1", "--lock", str(lock), "--insecure")
            assert checked.returncode == 0, checked.stdout + checked.stderr
            for output in (refused, exported, pushed_team, checked):
                assert "s3cret" not in output.stdout + output.stderr
            assert any(a.startswith("Basic ") for a in gate.seen_authorization)
        finally:
            server.shutdown()
            server.server_close()


def _venv_style_python(tmp_path: Path) -> Pkg:
    """A conda `python` package that runs for real without conda-forge: Debian's interpreter binary, with a
    `pyvenv.cfg` beside `bin/`, so the prefix is its sys.prefix (uv installs wheels there) and the stdlib
    is the host's /usr/lib/pythonX.Y."""
    import shutil

    binary = Path(shutil.which("python3", path="/usr/bin") or "/usr/bin/python3").resolve()
    if not binary.is_file():
        pytest.fail("this test links Debian's /usr/bin/python3 as a conda python; install python3 with apt")
    version = subprocess.run(
        [str(binary), "-c", "import platform; print(platform.python_version())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    xy = ".".join(version.split(".")[:2])
    return Pkg(
        "python",
        version,
        depends=("libpyrt",),
        links={"bin/python": f"python{xy}"},
        files={
            f"bin/python{xy}": binary.read_bytes(),
            "pyvenv.cfg": f"home = /usr/bin\ninclude-system-site-packages = false\nversion = {version}\n",
        },
    )


@pytest.mark.slow
@pytest.mark.parametrize("extends", ["../platform/stack.toml", "../base-img"])
def test_a_team_adding_wheels_links_only_the_base_python_again(tmp_path: Path, extends: str) -> None:
    """The team's wheels install with the base's Python: python and what it needs (libpyrt) are linked again
    from their archives; libtorchish is not, and the environment is still the whole team environment's. The
    same on the base named by its image (a conda base read from the lock the image carries: the team's wheels
    are solved on top of its conda python and packages)."""
    from tests.wheel_index import Wheel, build_index

    channel = build_channel(
        tmp_path / "channel",
        [
            _venv_style_python(tmp_path),
            Pkg("libpyrt", "1.0"),
            Pkg("libtorchish", "1.0", files={"lib/libtorchish.so": "x" * 200_000}),
        ],
    )
    index = build_index(tmp_path / "index", [Wheel("teamwheel", "1.0")])
    base = write(
        tmp_path / "platform" / "stack.toml",
        f'[stack]\nname = "platform"\nchannels = ["{channel.as_uri()}"]\n'
        '[dependencies]\npython = "*"\nlibtorchish = "*"\n'
        f'[pypi-options]\nindex-url = "{(index / "simple").as_uri()}"\n[targets.cpu]\narch = "cpu"\n',
    )
    assert run_cli("resolve", str(base)).returncode == 0
    glibc = python_base(tmp_path / "glibc", python=False)  # the loader and C libraries the conda python needs
    export(base.parent / "locks" / "cpu.conda-lock.yml", tmp_path / "base-img", "--base", str(glibc))
    options = f'[pypi-options]\nindex-url = "{(index / "simple").as_uri()}"\n' if extends == "../base-img" else ""
    stack = write(
        tmp_path / "team" / "stack.toml",
        f'[stack]\nname = "team"\nextends = "{extends}"\n[pypi-dependencies]\nteamwheel = "*"\n{options}',
    )
    resolved = run_cli("resolve", str(stack))
    assert resolved.returncode == 0, resolved.stderr
    lock = stack.parent / "locks" / "cpu.conda-lock.yml"
    done = run_cli("export", str(lock), "--out", str(tmp_path / "on-base"), "--base", str(tmp_path / "base-img"))
    assert done.returncode == 0, done.stderr
    assert "the base's Python and the 1 packages it needs are linked again" in done.stderr
    assert "linked 2 conda packages" in done.stderr and "installed 1 wheels" in done.stderr, done.stderr
    export(lock, tmp_path / "whole", "--base", str(glibc))
    assert environment_digest(tmp_path / "on-base") == environment_digest(tmp_path / "whole")
    base_layers, team_layers = layer_digests(tmp_path / "base-img"), layer_digests(tmp_path / "on-base")
    assert team_layers[: len(base_layers)] == base_layers and len(team_layers) - len(base_layers) == 2
    checked = run_cli("check", "--image", str(tmp_path / "on-base"), "--lock", str(lock))
    assert checked.returncode == 0, checked.stdout + checked.stderr
