"""Local packages of a stack (`mypkg = { path = "pkgs/mypkg", editable = true }`), end to end with the real tools:
uv resolves the package's own dependencies from a loopback index, builds it with its build backend (uv's own
`uv_build`, which builds with no network here and in a fresh venv, uv being one of lockgen's dependencies) and
installs it; the lock pins the folder (editable: its pyproject.toml, built: its source tree)."""

from __future__ import annotations

import functools
import http.server
import threading
from pathlib import Path

import pytest

from lockgen.adapters.pypi import local_source
from lockgen.adapters.lock.lockfile_yaml import load_lock
from lockgen.digests import file_digest
from lockgen.errors import UserError
from tests.conftest import _QuietHandler, run_cli, unsealed
from tests.wheel_index import Wheel, build_index

pytestmark = pytest.mark.xdist_group("local_packages")  # one worker builds the index once


@pytest.fixture(scope="module")
def index_url(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> str:
    root = build_index(tmp_path_factory.mktemp("index"), [Wheel("alpha", "1.0"), Wheel("beta", "1.0")])
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    request.addfinalizer(server.shutdown)
    return f"http://127.0.0.1:{server.server_address[1]}/simple"


def _project(tmp_path: Path, index_url: str, entry: str, requires: str = '"alpha"') -> tuple[Path, Path]:
    """A stack in `tmp_path/proj` with the local package `mypkg` in `pkgs/mypkg` (uv_build; requires alpha)."""
    stack_folder = tmp_path / "proj"
    package = stack_folder / "pkgs" / "mypkg"
    (package / "src" / "mypkg").mkdir(parents=True)
    (package / "pyproject.toml").write_text(
        '[project]\nname = "mypkg"\nversion = "0.1.0"\nrequires-python = ">=3.8"\ndependencies = '
        f'[{requires}]\n\n[build-system]\nrequires = ["uv_build>=0.8,<0.20"]\nbuild-backend = "uv_build"\n'
    )
    (package / "src" / "mypkg" / "__init__.py").write_text("X = 1\n")
    stack = stack_folder / "stack.toml"
    stack.write_text(
        '[stack]\nname = "local"\npython = "3.11"\n[pypi-dependencies]\nmypkg = '
        f'{entry}\n[pypi-options]\nindex-url = "{index_url}"\n[targets.cpu]\narch = "cpu"\n'
    )
    return stack, package


def _resolved(stack: Path) -> Path:
    done = run_cli("resolve", str(stack))
    assert done.returncode == 0, done.stderr
    return stack.parent / "locks" / "cpu.conda-lock.yml"


def _x(prefix: Path) -> str:
    import subprocess

    done = subprocess.run(
        [str(prefix / "bin" / "python"), "-c", "import mypkg, alpha; print(mypkg.X, mypkg.__file__)"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.slow
def test_an_editable_package_is_locked_with_its_dependencies_and_read_where_it_is(
    tmp_path: Path, index_url: str
) -> None:
    stack, package = _project(tmp_path, index_url, '{ path = "./pkgs/mypkg/", editable = true }')
    lock_path = _resolved(stack)
    lock = load_lock(lock_path)
    entries = {p.name: p for p in lock.package}
    assert sorted(entries) == ["alpha", "mypkg"]  # its dependency locked, from the index, by uv
    assert entries["mypkg"].url == "editable:pkgs/mypkg" and entries["mypkg"].version == "0.1.0"
    assert entries["mypkg"].hash.sha256 == file_digest(package / "pyproject.toml")
    from conda_lock.lockfile import parse_conda_lock_file  # conda-lock's own parser reads the lock

    assert {p.name for p in parse_conda_lock_file(lock_path).package} == {"alpha", "mypkg"}
    prefix = tmp_path / "env"
    done = run_cli("materialize", str(lock_path), "--prefix", str(prefix))
    assert done.returncode == 0, done.stderr
    assert _x(prefix) == f"1 {package / 'src' / 'mypkg' / '__init__.py'}"
    (package / "src" / "mypkg" / "__init__.py").write_text("X = 2\n")  # an edit: seen without materializing again
    assert _x(prefix).startswith("2 ")
    assert run_cli("check", "--prefix", str(prefix)).returncode == 0
    assert run_cli("resolve", str(stack), "--check").returncode == 0  # code edits leave an editable lock fresh
    (package / "pyproject.toml").write_text(
        (package / "pyproject.toml").read_text().replace('["alpha"]', '["alpha", "beta"]')
    )
    stale = run_cli("resolve", str(stack), "--check")
    assert (
        stale.returncode == 1
        and "local-changed" in stale.stdout + stale.stderr
        and "`mypkg`" in stale.stdout + stale.stderr
    )
    (package / "pyproject.toml").write_text(
        (package / "pyproject.toml").read_text().replace('version = "0.1.0"', 'version = "0.2.0"')
    )
    updated = run_cli("resolve", str(stack), "--update", "alpha")  # a local package is never held at its locked version
    assert updated.returncode == 0, updated.stderr
    assert {(p.name, p.version) for p in load_lock(lock_path).package} == {
        ("alpha", "1.0"),
        ("beta", "1.0"),
        ("mypkg", "0.2.0"),
    }


@pytest.mark.slow
def test_a_built_package_pins_its_source_tree_and_a_changed_tree_is_refused(tmp_path: Path, index_url: str) -> None:
    stack, package = _project(tmp_path, index_url, '{ path = "pkgs/mypkg" }')
    (package / "src" / "mypkg" / "__pycache__").mkdir()
    (package / "src" / "mypkg" / "__pycache__" / "x.pyc").write_bytes(b"cache")  # caches are no source
    lock_path = _resolved(stack)
    entry = next(p for p in load_lock(lock_path).package if p.name == "mypkg")
    assert entry.url == "local:pkgs/mypkg" and entry.hash.sha256 == local_source.tree_digest(package)
    prefix = tmp_path / "env"
    done = run_cli("materialize", str(lock_path), "--prefix", str(prefix))
    assert done.returncode == 0, done.stderr
    assert (
        _x(prefix) == f"1 {prefix / 'lib' / 'python3.11' / 'site-packages' / 'mypkg' / '__init__.py'}"
    )  # built and installed
    (package / "src" / "mypkg" / "__pycache__" / "y.pyc").write_bytes(b"more cache")
    assert run_cli("resolve", str(stack), "--check").returncode == 0
    for _ in range(2):  # a second run of a fresh stack is the one a kept verdict could answer
        ran = run_cli(
            "run", str(stack), "--target", "cpu", "--locked", "--prefix", str(prefix), "--", "python", "-c", "pass"
        )
        assert ran.returncode == 0, ran.stderr
    (package / "src" / "mypkg" / "__init__.py").write_text("X = 2\n")
    assert _x(prefix).startswith("1 ")  # the environment holds the build the lock pins
    locked = run_cli(
        "run", str(stack), "--target", "cpu", "--locked", "--prefix", str(prefix), "--", "python", "-c", "pass"
    )
    assert locked.returncode == 1 and "mypkg" in locked.stderr, (
        locked.stderr
    )  # no kept verdict stands for the folder's files
    stale = run_cli("resolve", str(stack), "--check")
    assert (
        stale.returncode == 1
        and "local-changed" in stale.stdout + stale.stderr
        and "source tree (pkgs/mypkg)" in stale.stdout + stale.stderr
    )
    refused = run_cli("materialize", str(lock_path), "--prefix", str(tmp_path / "env2"))
    assert (
        refused.returncode == 1 and "local package `mypkg`: its source tree (pkgs/mypkg) changed" in refused.stderr
    ), refused.stderr
    assert "lockgen resolve" in refused.stderr and "Traceback" not in refused.stderr
    assert not (tmp_path / "env2").exists()
    for command in (
        ["pack", str(lock_path), "--out", str(tmp_path / "p.tar")],
        ["export", str(lock_path), "--out", str(tmp_path / "img")],
        ["render", str(lock_path), "--format", "requirements", "--out", str(tmp_path / "r.txt")],
        ["check", "--lock", str(lock_path), "--prefix", str(prefix)],
    ):
        said = run_cli(*command)  # an image, a pack, another tool's format and a proof need a published file: refused
        assert (
            said.returncode == 1
            and "is a local package (local:pkgs/mypkg)" in said.stderr
            and "uv build" in said.stderr
        ), said.stderr
        assert not Path(command[-1]).exists() or command[0] == "check"


@pytest.mark.slow
def test_two_checkouts_of_one_editable_lock_each_run_their_own_package(tmp_path: Path, index_url: str) -> None:
    """The store keeps one environment per lock's bytes, but an editable package is read where the lock's folder
    keeps it: two checkouts holding the same lock bytes get an environment each, and each `run` (the typer path,
    then the fast path) imports its own checkout's package."""
    stacks = [_project(tmp_path / name, index_url, '{ path = "pkgs/mypkg", editable = true }') for name in ("a", "b")]
    first = _resolved(stacks[0][0])
    second = stacks[1][0].parent / "locks" / first.name
    second.parent.mkdir()
    second.write_bytes(first.read_bytes())  # the same bytes in another folder
    for (_, package), lock in zip(stacks, (first, second)):
        for _ in range(2):  # the second run is the one a kept record could answer
            done = run_cli("run", str(lock), "--", "python", "-c", "import mypkg; print(mypkg.__file__)")
            assert done.returncode == 0, done.stderr
            assert done.stdout.strip() == str(package / "src" / "mypkg" / "__init__.py"), done.stderr


def test_a_lock_naming_a_folder_outside_its_stack_or_another_mode_is_refused() -> None:
    """The package-set record pins a local entry's URL (its folder and mode): editable turned built by hand is
    refused; without the record, a URL whose folder leaves the stack's is refused by the field rules."""
    from lockgen.adapters.lock.lockfile_yaml import dump_lock, parse_lock
    from lockgen.core.lock.lock_builder import frozen_lock
    from lockgen.errors import LockFieldError, LockFormatError
    from lockgen.model.lock import LockedPackage, PackageHash

    def text(url: str) -> str:
        package = LockedPackage(
            name="mypkg",
            version="0.1.0",
            manager="pip",
            platform="linux-64",
            url=url,
            hash=PackageHash(sha256="a" * 64),
        )
        return dump_lock(frozen_lock("cpu", "x", "linux-64", "3.11", (), [package]))

    assert parse_lock(text("editable:pkgs/mypkg"), "cpu.conda-lock.yml").package[0].url == "editable:pkgs/mypkg"
    with pytest.raises(LockFormatError, match="not the ones lockgen wrote"):
        parse_lock(text("editable:pkgs/mypkg").replace("editable:pkgs/mypkg", "local:pkgs/mypkg"), "cpu.conda-lock.yml")
    for url in ("editable:../outside", "local:/etc", "local:.", "editable:pkgs/../../x", "local:pkgs//mypkg"):
        with pytest.raises(LockFieldError, match="names no folder below the stack's"):
            parse_lock(unsealed(text(url)), "cpu.conda-lock.yml")


def test_a_folder_reached_through_a_link_out_of_the_stack_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "pyproject.toml").write_text('[project]\nname = "mypkg"\nversion = "1"\n')
    stack_folder = tmp_path / "proj"
    stack_folder.mkdir()
    (stack_folder / "pkg").symlink_to(outside)
    with pytest.raises(UserError, match="leads outside the stack's folder"):
        local_source.folder_of(stack_folder, "pkg", "mypkg")
    (stack_folder / "inside").mkdir()
    with pytest.raises(UserError, match=r"holds no pyproject\.toml"):
        local_source.folder_of(stack_folder, "inside", "mypkg")


@pytest.mark.slow
def test_a_lock_moved_out_of_its_stack_names_where_its_local_package_is_found(tmp_path: Path, index_url: str) -> None:
    stack, _ = _project(tmp_path, index_url, '{ path = "pkgs/mypkg", editable = true }')
    moved = tmp_path / "cpu.conda-lock.yml"
    moved.write_bytes(_resolved(stack).read_bytes())
    said = run_cli("materialize", str(moved), "--prefix", str(tmp_path / "env"))
    assert (
        said.returncode == 1
        and "not in a stack's locks/ folder" in said.stderr
        and "STACK_FOLDER/locks/" in said.stderr
    ), said.stderr
    assert not (tmp_path / "env").exists()


def test_a_team_stack_on_a_lock_with_a_local_package_is_refused(tmp_path: Path) -> None:
    """A local entry's folder is relative to the stack that locked it: a team stack elsewhere cannot hold it."""
    from tests.conftest import REPO

    (tmp_path / "platform" / "locks").mkdir(parents=True)
    (tmp_path / "platform" / "locks" / "cpu.conda-lock.yml").write_bytes(
        (REPO / "envs" / "examples" / "local-package" / "locks" / "cpu.conda-lock.yml").read_bytes()
    )
    (tmp_path / "team").mkdir()
    (tmp_path / "team" / "stack.toml").write_text(
        '[stack]\nname = "team"\nextends = "../platform/locks/cpu.conda-lock.yml"\n[pypi-dependencies]\nsix = "*"\n'
    )
    said = run_cli("resolve", str(tmp_path / "team" / "stack.toml"))
    assert (
        said.returncode == 1
        and "holds the local package `hello` (editable:hello)" in said.stderr
        and "Traceback" not in said.stderr
    ), said.stderr


def test_a_built_package_s_digest_covers_what_a_build_reads_and_refuses_links_out(tmp_path: Path) -> None:
    """A subpackage named `build` is source (only the top's `build/` and `dist/` are outputs); a link's digest
    follows it to the content a build reads; a link out of the package's folder is refused (a review found both
    edits left the digest as it was, and a link's target outside read unpinned)."""
    package = tmp_path / "pkg"
    (package / "src" / "mypkg" / "build").mkdir(parents=True)
    (package / "pyproject.toml").write_text('[project]\nname = "mypkg"\nversion = "0.1.0"\n')
    (package / "src" / "mypkg" / "build" / "__init__.py").write_text("X = 1\n")
    (package / "shared.py").write_text("Y = 1\n")
    (package / "src" / "mypkg" / "data.py").symlink_to("../../shared.py")
    (package / "build").mkdir()  # the top's build output: not source
    (package / "build" / "junk").write_text("1")
    before = local_source.tree_digest(package)
    (package / "build" / "junk").write_text("2")
    assert local_source.tree_digest(package) == before
    (package / "src" / "mypkg" / "build" / "__init__.py").write_text("X = 2\n")
    nested = local_source.tree_digest(package)
    assert nested != before
    (package / "shared.py").write_text("Y = 2\n")  # what the link leads to
    assert local_source.tree_digest(package) != nested
    (tmp_path / "outside.py").write_text("Z = 1\n")
    (package / "src" / "mypkg" / "out.py").symlink_to(tmp_path / "outside.py")
    with pytest.raises(UserError, match="leads outside"):
        local_source.tree_digest(package)
