"""A vendor's Python environment adopted as the held base of a team stack: a venv made by plain `pip install`
(two PyPI wheels and a local build no index publishes) is inventoried, pinned (`pin --allow-unpublished`)
and exported at its own path (`export --from-prefix`); a team stack `extends` that lock, resolves with every
base package held (the local build kept out of uv's solve), and its image on the vendor image is the vendor's
layers plus the team's wheels, installed into the vendor's prefix, proven file by file by `check --image
--lock` and importable with the vendor's interpreter; on the vendor image in a registry (read shallow) it is
the same image, byte for byte."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lockgen.adapters.image import oci_layout
from lockgen.adapters.lock.lockfile_yaml import load_lock
from tests.conftest import loopback_registry, run_cli
from tests.test_conformance_envs import DEAD_PROXY
from tests.image_run import require
from tests.python_base import host_python, python_base
from tests.test_team_stacks import write
from tests.wheel_index import Wheel, build_wheel

pytestmark = [pytest.mark.network, pytest.mark.slow]  # every test here solves with uv or builds an image first
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
TEAM = (
    '[stack]\nname = "team"\nextends = '
    '"{extends}"\n{stack}\n[pypi-dependencies]\n{deps}\n[pypi-options]\nexclude-newer = "2026-11-15"\n{targets}'
)
NODE = '[targets.node]\narch = "cpu"\n'


@pytest.fixture(scope="module")
def vendor(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the folder holding vendor/locks and vendor-img, the vendor's venv)."""
    root = tmp_path_factory.mktemp("adopted")
    venv = root / "vendor-venv"  # on this host's Debian python, which the vendor's base image holds at its path
    subprocess.run([str(host_python()), "-m", "venv", "--without-pip", str(venv)], check=True)
    local = build_wheel(Wheel("vendorlib", "1.0+vendor", files={"vendorlib/fast.py": "FAST = True\n"}), root)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "-q",
            "--no-cache-dir",
            "--index-url",
            "https://pypi.org/simple",
            "six==1.17.0",
            "idna==3.10",
            str(local),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    home = {"LOCKGEN_HOME": str(root / "home")}
    assert (
        run_cli(
            "freeze", "--python", str(venv / "bin" / "python"), "--inventory", str(root / "inv.json"), env=home
        ).returncode
        == 0
    )
    lock = root / "vendor" / "locks" / "node.conda-lock.yml"
    pinned = run_cli(
        "pin", str(root / "inv.json"), "--target", "node", "--out", str(lock), "--allow-unpublished", env=home
    )
    assert pinned.returncode == 0, pinned.stderr
    exported = run_cli(
        "export",
        str(lock),
        "--from-prefix",
        str(venv),
        "--manifests",
        str(lock.with_name("node.manifests.json.gz")),
        "--base",
        str(python_base(root / "python-base")),
        "--out",
        str(root / "vendor-img"),
        env=home,
    )
    assert exported.returncode == 0, exported.stderr
    return root, venv


def team(
    root: Path, deps: str, stack: str = "", targets: str = NODE, extends: str = "../vendor/locks/node.conda-lock.yml"
) -> Path:
    return write(root / "team" / "stack.toml", TEAM.format(extends=extends, stack=stack, deps=deps, targets=targets))


def resolved_team_lock(root: Path) -> Path:
    """The lock of the team stack adding python-dateutil to the adopted lock, resolved."""
    stack = team(root, 'python-dateutil = "==2.9.0.post0"')
    assert run_cli("resolve", str(stack)).returncode == 0
    return stack.parent / "locks" / "node.conda-lock.yml"


def entries(lock: Path) -> dict[str, object]:
    return {p.name: p for p in load_lock(lock).package}


def test_a_team_stack_on_an_adopted_lock_holds_every_entry(vendor: tuple[Path, Path]) -> None:
    root, _ = vendor
    stack = team(root, 'python-dateutil = "==2.9.0.post0"')
    done = run_cli("resolve", str(stack))
    assert done.returncode == 0, done.stderr
    base, mine = (
        entries(root / "vendor" / "locks" / "node.conda-lock.yml"),
        entries(stack.parent / "locks" / "node.conda-lock.yml"),
    )
    assert set(base) == {"six", "idna", "vendorlib"} and set(mine) - set(base) == {"python-dateutil"}
    assert all(mine[name] == base[name] for name in base)  # the base's entries as they are, the check-only one too
    assert mine["vendorlib"].url == "unpublished:vendorlib==1.0+vendor"
    meta = load_lock(stack.parent / "locks" / "node.conda-lock.yml").metadata.custom_metadata
    assert meta["lockgen.unpublished"] == "vendorlib 1.0+vendor" and meta["lockgen.python.linux-64"] == PYTHON
    assert meta["lockgen.extends"] == "../vendor/locks/node.conda-lock.yml" and meta["lockgen.arch"] == "cpu"
    assert run_cli("resolve", str(stack), "--check").returncode == 0


def test_a_team_requirement_that_moves_the_adopted_base_names_only_that_package(vendor: tuple[Path, Path]) -> None:
    root, _ = vendor
    moved = run_cli("resolve", str(team(root, 'python-dateutil = "==2.9.0.post0"\nidna = ">=3.11"')), "--dry-run")
    assert moved.returncode == 1
    line = next(line for line in moved.stderr.splitlines() if line.startswith("error:"))
    assert "would move packages the base holds: node on linux-64: idna 3.10 -> 3." in line and "six" not in line
    # the check-only build is solved as its version (uv gets a stand-in of it): a requirement it fails is refused
    kept = run_cli("resolve", str(team(root, 'vendorlib = "==1.0+vendor"\nsix = "<2"')), "--dry-run")
    assert kept.returncode == 0, kept.stderr
    refused = run_cli("resolve", str(team(root, 'vendorlib = ">=2"')), "--dry-run")
    assert refused.returncode == 1 and "vendorlib" in refused.stderr and "Traceback" not in refused.stderr, (
        refused.stderr
    )


@pytest.mark.parametrize(
    "stack, targets, fragment",
    [
        ("", "", "records no hardware for its target `node`"),
        ("", '[targets.gpu]\narch = "cpu"\n', "the base lock is of target `node`"),
        (f'python = "{PYTHON}"', NODE, "`python` comes from the base lock"),
        ("", NODE + 'platforms = ["linux-aarch64"]\n', "the platforms of target `node` are the base lock's"),
        ('exclude-newer = "2026-01-01"', NODE, "set the team's PyPI cut-off as [pypi-options] exclude-newer"),
    ],
)
def test_a_bad_team_stack_on_a_lock_is_one_error(
    vendor: tuple[Path, Path], stack: str, targets: str, fragment: str
) -> None:
    root, _ = vendor
    done = run_cli("resolve", str(team(root, 'python-dateutil = "*"', stack, targets)), "--dry-run")
    assert done.returncode == 1 and fragment in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_the_team_image_is_the_vendor_image_plus_the_team_s_wheels_in_its_prefix(
    vendor: tuple[Path, Path], tmp_path: Path
) -> None:
    root, venv = vendor
    lock, home = resolved_team_lock(root), {"LOCKGEN_HOME": str(tmp_path / "home")}
    done = run_cli(
        "export", str(lock), "--base", str(root / "vendor-img"), "--out", str(tmp_path / "team-img"), env=home
    )
    assert done.returncode == 0, done.stderr
    assert "the team's 1 packages are installed alone, into its prefix" in done.stderr
    base_manifest, _, _ = oci_layout.read_image(root / "vendor-img")
    manifest, config, _ = oci_layout.read_image(tmp_path / "team-img")
    count = len(base_manifest["layers"])
    assert manifest["layers"][:count] == base_manifest["layers"] and len(manifest["layers"]) > count
    assert config["config"]["Labels"]["dev.lockgen.prefix"] == str(venv)
    checked = run_cli(
        "check",
        "--lock",
        str(lock),
        "--image",
        str(tmp_path / "team-img"),
        "--manifests",
        str(root / "vendor" / "locks" / "node.manifests.json.gz"),
        "--json",
        env=home,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert json.loads(checked.stdout)["clean"] is True
    alone = run_cli("check", "--image", str(tmp_path / "team-img"), env=home)  # its own record, at the vendor's prefix
    assert alone.returncode == 0, alone.stderr
    bundle = (
        tmp_path / "team.manifests.json.gz"
    )  # one bundle for nodes without network: the pin's check-only entries too
    assert (
        run_cli(
            "manifests",
            str(lock),
            "--manifests",
            str(root / "vendor" / "locks" / "node.manifests.json.gz"),
            "--out",
            str(bundle),
            env=home,
        ).returncode
        == 0
    )
    offline = run_cli(
        "check",
        "--lock",
        str(lock),
        "--image",
        str(tmp_path / "team-img"),
        "--manifests",
        str(bundle),
        env={"LOCKGEN_HOME": str(tmp_path / "empty-home"), **DEAD_PROXY},
    )
    assert offline.returncode == 0, offline.stderr
    tree = tmp_path / "rootfs"
    oci_layout.unpack(tmp_path / "team-img", tree)
    prefix = tree / str(venv).lstrip("/")
    assert not (prefix / "lib" / f"python{PYTHON}" / "site-packages" / "_virtualenv.pth").exists()
    ran = subprocess.run(
        [str(prefix / "bin" / "python"), "-c", "import dateutil, six, vendorlib.fast; print(dateutil.__file__)"],
        capture_output=True,
        text=True,
    )
    assert ran.returncode == 0 and ran.stdout.startswith(str(prefix)), ran.stderr
    again = run_cli(
        "export",
        str(lock),
        "--base",
        str(root / "vendor-img"),
        "--out",
        str(tmp_path / "again"),
        env={"LOCKGEN_HOME": str(tmp_path / "other-home")},
    )
    assert again.stdout.splitlines()[0] == done.stdout.splitlines()[0]  # the same image digest, byte for byte


def test_the_team_image_on_the_vendor_image_in_a_registry_is_the_image_on_a_local_copy(
    vendor: tuple[Path, Path], tmp_path: Path
) -> None:
    root, _ = vendor
    lock, home = resolved_team_lock(root), {"LOCKGEN_HOME": str(tmp_path / "home")}
    local = run_cli("export", str(lock), "--base", str(root / "vendor-img"), "--out", str(tmp_path / "local"), env=home)
    assert local.returncode == 0, local.stderr
    (tmp_path / "registry").mkdir()
    with loopback_registry(tmp_path / "registry") as host:
        pushed = run_cli("push", str(root / "vendor-img"), f"docker://{host}/vendor/python:1", "--insecure")
        assert pushed.returncode == 0, pushed.stderr
        remote = run_cli(
            "export",
            str(lock),
            "--base",
            f"docker://{host}/vendor/python@{pushed.stdout.strip()}",
            "--insecure",
            "--out",
            str(tmp_path / "remote"),
            env=home,
        )
        assert remote.returncode == 0, remote.stderr
        assert "installed alone, into its prefix" in remote.stderr  # the held record read from the registry's layers
        assert remote.stdout.splitlines()[0] == local.stdout.splitlines()[0]
        target = f"docker://{host}/team/python:1"
        assert (
            run_cli("push", str(tmp_path / "remote"), target, "--insecure").stdout.strip()
            == remote.stdout.splitlines()[0]
        )
        checked = run_cli(
            "check",
            "--image",
            target,
            "--lock",
            str(lock),
            "--insecure",
            "--manifests",
            str(root / "vendor" / "locks" / "node.manifests.json.gz"),
            env=home,
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr


def _foreign_image(venv: Path, layout: Path, change: str = "") -> None:
    """The venv as another tool's image: on a base holding its Python, umoci's layer of a root file system holding
    it at its own path (its six.py rewritten when `change` is given)."""
    umoci = require("umoci")
    python_base(layout, tag="vendor")
    subprocess.run(
        [umoci, "unpack", "--image", f"{layout}:vendor", str(layout.parent / "bundle")],
        check=True,
        capture_output=True,
        timeout=120,
    )
    inside = layout.parent / "bundle" / "rootfs" / str(venv).lstrip("/")
    shutil.copytree(venv, inside, symlinks=True)
    if change:
        (inside / "lib" / f"python{PYTHON}" / "site-packages" / "six.py").write_text(change)
    subprocess.run(
        [umoci, "repack", "--image", f"{layout}:vendor", str(layout.parent / "bundle")],
        check=True,
        capture_output=True,
        timeout=60,
    )


def test_a_vendor_image_lockgen_did_not_make_is_adopted_with_its_layers_as_they_are(
    vendor: tuple[Path, Path], tmp_path: Path
) -> None:
    root, venv = vendor
    lock, bundle = (
        root / "vendor" / "locks" / "node.conda-lock.yml",
        root / "vendor" / "locks" / "node.manifests.json.gz",
    )
    home = {"LOCKGEN_HOME": str(tmp_path / "home")}
    _foreign_image(venv, tmp_path / "foreign" / "layout")
    adopted = run_cli(
        "export",
        str(lock),
        "--from-image",
        str(tmp_path / "foreign" / "layout"),
        "--image-prefix",
        str(venv),
        "--manifests",
        str(bundle),
        "--out",
        str(tmp_path / "adopted"),
        env=home,
    )
    assert adopted.returncode == 0, adopted.stderr
    vendor_manifest, _, _ = oci_layout.read_image(tmp_path / "foreign" / "layout")
    manifest, config, _ = oci_layout.read_image(tmp_path / "adopted")
    assert (
        manifest["layers"][:-1] == vendor_manifest["layers"]
    )  # umoci's layers as they are, one layer of lockgen's on top
    assert config["config"]["Labels"]["dev.lockgen.prefix"] == str(venv)
    checked = run_cli(
        "check", "--image", str(tmp_path / "adopted"), "--lock", str(lock), "--manifests", str(bundle), env=home
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    team_lock = resolved_team_lock(root)
    on_it = run_cli(
        "export", str(team_lock), "--base", str(tmp_path / "adopted"), "--out", str(tmp_path / "team"), env=home
    )
    assert on_it.returncode == 0 and "installed alone, into its prefix" in on_it.stderr, on_it.stderr
    team_checked = run_cli(
        "check", "--image", str(tmp_path / "team"), "--lock", str(team_lock), "--manifests", str(bundle), env=home
    )
    assert team_checked.returncode == 0, team_checked.stdout + team_checked.stderr
    (tmp_path / "registry").mkdir()
    with loopback_registry(tmp_path / "registry") as host:  # the vendor image in its registry: its layer stays there
        pushed = run_cli("push", str(tmp_path / "foreign" / "layout"), f"docker://{host}/vendor/raw:1", "--insecure")
        assert pushed.returncode == 0, pushed.stderr
        remote = f"docker://{host}/vendor/raw@{pushed.stdout.strip()}"
        shallow = run_cli(
            "export",
            str(lock),
            "--from-image",
            remote,
            "--insecure",
            "--image-prefix",
            str(venv),
            "--manifests",
            str(bundle),
            "--out",
            str(tmp_path / "adopted-remote"),
            env=home,
        )
        assert shallow.returncode == 0, shallow.stderr
        assert oci_layout.read_image(tmp_path / "adopted-remote")[0]["layers"][:-1] == vendor_manifest["layers"]
        target = f"docker://{host}/vendor/adopted:1"
        assert run_cli("push", str(tmp_path / "adopted-remote"), target, "--insecure").returncode == 0
        proven = run_cli(
            "check", "--image", target, "--insecure", "--lock", str(lock), "--manifests", str(bundle), env=home
        )
        assert proven.returncode == 0, proven.stdout + proven.stderr
    _foreign_image(venv, tmp_path / "forged" / "layout", change="print('not six')\n")
    refused = run_cli(
        "export",
        str(lock),
        "--from-image",
        str(tmp_path / "forged" / "layout"),
        "--image-prefix",
        str(venv),
        "--manifests",
        str(bundle),
        "--out",
        str(tmp_path / "forged-out"),
        env=home,
    )
    assert (
        refused.returncode == 1 and "six 1.17.0: modified" in refused.stderr and not (tmp_path / "forged-out").exists()
    )


def test_a_team_stack_extends_the_vendor_image_itself(vendor: tuple[Path, Path], tmp_path: Path) -> None:
    """`extends` names lockgen's image of the adopted lock (a layout, or in a registry): the lock the image
    carries, held to its label, is the base; an image lockgen did not label is refused."""
    root, venv = vendor
    lock_bytes = (root / "vendor" / "locks" / "node.conda-lock.yml").read_bytes()
    local = team(root, 'python-dateutil = "==2.9.0.post0"', extends="../vendor-img")
    done = run_cli("resolve", str(local))
    assert done.returncode == 0, done.stderr
    assert (root / "team" / "locks" / "_base.conda-lock.yml").read_bytes() == lock_bytes
    assert set(entries(root / "team" / "locks" / "node.conda-lock.yml")) == {
        "six",
        "idna",
        "vendorlib",
        "python-dateutil",
    }
    assert run_cli("resolve", str(local), "--check").returncode == 0
    (tmp_path / "registry").mkdir()
    with loopback_registry(tmp_path / "registry") as host:
        pushed = run_cli("push", str(root / "vendor-img"), f"docker://{host}/vendor/python:1", "--insecure")
        assert pushed.returncode == 0, pushed.stderr
        reference = f"docker://{host}/vendor/python@{pushed.stdout.strip()}"
        remote = team(root, 'python-dateutil = "==2.9.0.post0"', extends=reference)
        assert run_cli("resolve", str(remote), "--insecure").returncode == 0
        team_lock = root / "team" / "locks" / "node.conda-lock.yml"
        assert load_lock(team_lock).meta("extends") == reference
        exported = run_cli(
            "export",
            str(team_lock),
            "--base",
            reference,
            "--insecure",
            "--out",
            str(tmp_path / "team-img"),
            env={"LOCKGEN_HOME": str(tmp_path / "home")},
        )
        assert exported.returncode == 0 and "installed alone, into its prefix" in exported.stderr, exported.stderr
        listed = run_cli("certs", str(root / "team"))  # the base's certificates are the image's attestations
        assert (
            f"its base is the image {reference}; its certificates are attestations (lockgen certs {reference})"
            in listed.stderr
        )
    _foreign_image(venv, tmp_path / "foreign" / "layout")
    shutil.copytree(tmp_path / "foreign" / "layout", root / "foreign-img")
    refused = run_cli("resolve", str(team(root, 'python-dateutil = "*"', extends="../foreign-img")))
    assert refused.returncode == 1 and "is not lockgen's image of a lock" in refused.stderr, refused.stderr


def test_export_from_prefix_never_writes_into_the_environment_it_links(
    vendor: tuple[Path, Path], tmp_path: Path
) -> None:
    """The image tree is hard links of the source: lockgen's own `.lockgen/` files are written fresh, never
    through a link, even when the lock exported is the source's own `.lockgen/lock.conda-lock.yml`."""
    root, venv = vendor
    lock, bundle = (
        root / "vendor" / "locks" / "node.conda-lock.yml",
        root / "vendor" / "locks" / "node.manifests.json.gz",
    )
    copy = tmp_path / "env"
    shutil.copytree(venv, copy, symlinks=True)
    (copy / ".lockgen").mkdir()
    (copy / ".lockgen" / "lock.conda-lock.yml").write_bytes(lock.read_bytes())
    (copy / ".lockgen" / "manifest.json").write_text("{}\n")
    before = {p.name: p.read_bytes() for p in (copy / ".lockgen").iterdir()}
    done = run_cli(
        "export",
        str(copy / ".lockgen" / "lock.conda-lock.yml"),
        "--from-prefix",
        str(copy),
        "--manifests",
        str(bundle),
        "--base",
        str(root / "python-base"),
        "--out",
        str(tmp_path / "img"),
        env={"LOCKGEN_HOME": str(tmp_path / "home")},
    )
    assert done.returncode == 0, done.stderr
    assert {p.name: p.read_bytes() for p in (copy / ".lockgen").iterdir()} == before
    (copy / ".lockgen" / "lock.conda-lock.yml").write_text("version: 1\n")  # another lock than the one checked
    checked = run_cli("check", "--lock", str(lock), "--prefix", str(copy), "--manifests", str(bundle))
    assert (
        checked.returncode == 1 and "the image's own lock: modified .lockgen/lock.conda-lock.yml" in checked.stdout
    ), checked.stdout
    bad = run_cli(
        "export", str(lock), "--from-prefix", str(venv), "--image-prefix", "/opt/../etc", "--out", str(tmp_path / "x")
    )
    assert bad.returncode == 1 and "cannot be the environment's path in the image" in bad.stderr


def test_a_base_image_named_by_a_tag_is_refused(vendor: tuple[Path, Path]) -> None:
    root, _ = vendor
    done = run_cli(
        "resolve", str(team(root, 'python-dateutil = "*"', extends="docker://127.0.0.1:9/vendor/python:latest"))
    )
    assert done.returncode == 1 and "names the base image by a tag" in done.stderr, done.stderr
