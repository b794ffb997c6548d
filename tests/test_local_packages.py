"""Local packages of a stack (`mypkg = { path = "pkgs/mypkg", editable = true }`), end to end with the real tools:
uv resolves the package's own dependencies from a loopback index, builds it with its build backend (uv's own
`uv_build`, which builds with no network here and in a fresh venv, uv being one of lockgen's dependencies) and
installs it; the lock pins the folder (editable: its pyproject.toml, built: its source tree)."""

from __future__ import annotations

import base64
import functools
import hashlib
import http.server
import json
import shutil
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
    ):
        said = run_cli(*command)  # an image, a pack and another tool's format need a published file: refused
        assert (
            said.returncode == 1
            and "is a local package (local:pkgs/mypkg)" in said.stderr
            and "uv build" in said.stderr
        ), said.stderr
        assert not Path(command[-1]).exists()


def _replaced(path: Path, text: str) -> None:
    """`path` replaced by a new file holding `text` (never written through: it is a hard link into lockgen's store)."""
    path.unlink()
    path.write_text(text)


def _checked(lock: Path, prefix: Path, code: int, env: dict[str, str] | None = None) -> str:
    done = run_cli("check", "--lock", str(lock), "--prefix", str(prefix), env=env)
    assert done.returncode == code and "Traceback" not in done.stderr, done.stdout + done.stderr
    return done.stdout + done.stderr


def _record_row(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def _forged_with_its_record(prefix: Path, path: str, data: bytes) -> None:
    """`path` (site-packages-relative) of mypkg's install written as `data`, its RECORD row made to match, the row
    added where the RECORD has none: what whoever can write the venv can do to an install's own RECORD."""
    site = prefix / "lib" / "python3.11" / "site-packages"
    record = site / "mypkg-0.1.0.dist-info" / "RECORD"
    rows = [row for row in record.read_text().splitlines() if not row.startswith(f"{path},")]
    (site / path).parent.mkdir(parents=True, exist_ok=True)
    (site / path).unlink(missing_ok=True)  # a hard link to the cache's file: written anew, never through
    (site / path).write_bytes(data)
    _replaced(record, "\n".join(rows + [_record_row(path, data)]) + "\n")


@pytest.mark.slow
def test_check_lock_proves_a_built_local_package_against_its_rebuilt_wheel(tmp_path: Path, index_url: str) -> None:
    """Issue 44: `check --lock` refused any lock holding a local package. The published part is proven as always;
    a built package against a wheel built again from its folder while the folder's tree is the one the lock pins,
    else it is said not provable by content (exit 0 when everything provable passed)."""
    stack, package = _project(tmp_path, index_url, '{ path = "pkgs/mypkg" }')
    lock = _resolved(stack)
    prefix = tmp_path / "env"
    assert run_cli("materialize", str(lock), "--prefix", str(prefix)).returncode == 0
    said = _checked(lock, prefix, 0)
    assert "local package mypkg 0.1.0 (built, pkgs/mypkg): proven against a wheel built again from its folder" in said
    assert f"is the environment of {lock} as far as it can be proven (1 local" in said and ": 2 packages" in said
    installed = prefix / "lib" / "python3.11" / "site-packages" / "mypkg" / "__init__.py"
    _replaced(installed, "X = 3\n")
    assert "mypkg 0.1.0: modified mypkg/__init__.py" in _checked(lock, prefix, 1)
    _replaced(installed, "X = 1\n")
    said = _checked(lock, prefix, 1, {"UV_BUILD_CONSTRAINT": str(tmp_path / "absent.txt")})  # the build fails
    assert "(built, pkgs/mypkg): not provable: building it again failed (building local package mypkg" in said
    (package / "src" / "mypkg" / "__init__.py").write_text("X = 2\n")  # the locked tree is no longer there
    _forged_with_its_record(prefix, "mypkg/__init__.py", b"X = 'forged'\n")
    said = _checked(lock, prefix, 1)  # the RECORD its install wrote, forged beside the file, proves nothing
    assert "(built, pkgs/mypkg): not provable: local package `mypkg`: its source tree (pkgs/mypkg) changed" in said
    assert "(restore that folder to the locked tree, or lock it again and materialize a fresh prefix)" in said
    alpha = prefix / "lib" / "python3.11" / "site-packages" / "alpha" / "__init__.py"
    _replaced(alpha, "VERSION = 'forged'\n")  # the published part is still proven by its own RECORD
    assert "alpha 1.0: modified alpha/__init__.py" in _checked(lock, prefix, 1)


@pytest.mark.slow
def test_check_lock_says_what_it_cannot_prove_of_an_editable_package(tmp_path: Path, index_url: str) -> None:
    """An editable package's code is read from its folder and its dist-info and .pth are the install's own: not
    provable by content, and said so; that it was installed editable from the locked folder, whose pyproject.toml
    the lock pins, is proven, and either wrong fails the check."""
    stack, package = _project(tmp_path, index_url, '{ path = "pkgs/mypkg", editable = true }')
    lock = _resolved(stack)
    prefix = tmp_path / "env"
    assert run_cli("materialize", str(lock), "--prefix", str(prefix)).returncode == 0
    said = _checked(lock, prefix, 0)
    assert "(editable, pkgs/mypkg): not provable by content: its code is read from its folder" in said, said
    assert f"proven: installed editable from {package.resolve()}, whose pyproject.toml is the locked one" in said
    done = run_cli("check", "--lock", str(lock), "--prefix", str(prefix), "--json")
    assert json.loads(done.stdout)["local_packages"] == [line for line in said.splitlines() if "(editable" in line]
    direct_url = prefix / "lib" / "python3.11" / "site-packages" / "mypkg-0.1.0.dist-info" / "direct_url.json"
    honest = direct_url.read_bytes()
    _replaced(direct_url, '{"url": "file:///elsewhere", "dir_info": {"editable": true}}')
    assert "is not installed editable from that folder (/elsewhere)" in _checked(lock, prefix, 1)
    direct_url.unlink()
    direct_url.write_bytes(honest)
    (package / "pyproject.toml").write_text((package / "pyproject.toml").read_text() + "# edited\n")
    said = _checked(lock, prefix, 1)
    assert "its pyproject.toml (pkgs/mypkg) changed since the lock was made, and the environment reads" in said
    assert "hint: materialize the lock into a fresh prefix (lock it again first" in said


@pytest.mark.slow
def test_check_lock_holds_an_editable_install_s_record_to_what_an_editable_install_writes(
    tmp_path: Path, index_url: str
) -> None:
    """The RECORD of an editable install is the install's own: a file added beside it with a row to match (a
    package shadowing the folder's), or a line of code added to its .pth with its row fixed, passed the check.
    Only its dist-info and one .pth naming the locked folder (uv writes the folder's `src`) are accepted."""
    stack, package = _project(tmp_path, index_url, '{ path = "pkgs/mypkg", editable = true }')
    lock = _resolved(stack)
    honest = tmp_path / "env"
    assert run_cli("materialize", str(lock), "--prefix", str(honest)).returncode == 0
    site = honest / "lib" / "python3.11" / "site-packages"
    assert (site / "mypkg.pth").read_text().strip() == str(package.resolve() / "src")  # uv's editable form
    assert "proven: installed editable from" in _checked(lock, honest, 0)
    shadowed = tmp_path / "shadowed"
    shutil.copytree(honest, shadowed, symlinks=True)
    _forged_with_its_record(shadowed, "mypkg/__init__.py", b"X = 'forged'\n")
    said = _checked(lock, shadowed, 1)
    assert "mypkg 0.1.0: lib/python3.11/site-packages/mypkg/__init__.py (not a file an editable install writes)" in said
    assert "proven: installed editable" not in said
    hooked = tmp_path / "hooked"
    shutil.copytree(honest, hooked, symlinks=True)
    pth = (site / "mypkg.pth").read_text()
    _forged_with_its_record(hooked, "mypkg.pth", (pth + "\nimport os; os.environ['FORGED'] = '1'\n").encode())
    said = _checked(lock, hooked, 1)
    assert "mypkg 0.1.0: lib/python3.11/site-packages/mypkg.pth (not one line naming the folder" in said
    _forged_with_its_record(hooked, "mypkg.pth", f"{tmp_path}\n".encode())
    assert f"mypkg.pth (names {tmp_path}, outside the folder {package.resolve()})" in _checked(lock, hooked, 1)


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
