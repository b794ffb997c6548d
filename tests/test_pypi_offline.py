"""The PyPI layer against a local index of wheels the tests build, served over HTTP on loopback:
hashes, environment markers, platform tags and yanked releases, with no network."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from lockgen.api import resolve as api
from lockgen.adapters.lock.lockfile_yaml import load_lock
from tests.wheel_index import Wheel, build_index

WHEELS = [
    Wheel("alpha", "1.0"),
    Wheel("alpha", "2.0", yanked=True),
    Wheel("beta", "1.0", tag="cp311-cp311-manylinux_2_17_x86_64"),
    Wheel("beta", "1.0", tag="cp311-cp311-manylinux_2_17_aarch64"),
    Wheel("beta", "1.1", tag="cp311-cp311-manylinux_2_34_x86_64"),
    Wheel("gamma", "1.0", requires=("delta ; platform_machine == 'aarch64'", "alpha")),
    Wheel("delta", "1.0"),
    Wheel("macos-only", "1.0", tag="py3-none-macosx_11_0_arm64"),
    Wheel("climber", "1.0", files={"../../../../climbed.txt": "x\n"}),  # a member and RECORD path that climb out
    Wheel("scripter", "1.0", files={"scripter-1.0.data/scripts/../../../../../climbed-script": "x\n"}),
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> tuple[str, Path]:
    """(index URL, folder) of the local index."""
    import functools
    import http.server
    import threading

    from tests.conftest import _QuietHandler

    root = build_index(tmp_path_factory.mktemp("index"), WHEELS)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    request.addfinalizer(server.shutdown)
    return f"http://127.0.0.1:{server.server_address[1]}/simple", root


@pytest.fixture
def index_url(served: tuple[str, Path]) -> str:
    return served[0]


def stack(tmp_path: Path, url: str, deps: str) -> Path:
    path = tmp_path / "stack.toml"
    path.write_text(
        '[stack]\nname = "offline"\npython = "3.11"\nplatforms = ["linux-64", '
        f'"linux-aarch64"]\n[pypi-dependencies]\n{deps}\n[pypi-options]\nindex-url = '
        f'"{url}"\n[targets.cpu]\narch = "cpu"\n'
    )
    return path


def test_markers_platform_tags_yanked_and_hashes(tmp_path: Path, index_url: str, served: tuple[str, Path]) -> None:
    api.resolve(stack(tmp_path, index_url, 'gamma = "*"\nbeta = "*"'))
    lock = load_lock(tmp_path / "locks" / "cpu.conda-lock.yml")
    x86 = {p.name: p for p in lock.packages_for("linux-64")}
    arm = {p.name: p for p in lock.packages_for("linux-aarch64")}
    assert x86["alpha"].version == "1.0"  # 2.0 is yanked
    assert "delta" in arm and "delta" not in x86  # the marker holds on aarch64 only
    assert x86["beta"].version == "1.0" and x86["beta"].url.endswith(
        "manylinux_2_17_x86_64.whl"
    )  # 1.1 needs glibc 2.34
    assert arm["beta"].url.endswith("manylinux_2_17_aarch64.whl")
    root = served[1]
    for package in lock.package:
        data = (root / "files" / package.url.rsplit("/", 1)[-1]).read_bytes()
        assert package.hash.sha256 == hashlib.sha256(data).hexdigest()


def test_newer_glibc_target_gets_the_newer_wheel(tmp_path: Path, index_url: str) -> None:
    path = stack(tmp_path, index_url, 'beta = "*"')
    path.write_text(path.read_text().replace('arch = "cpu"', 'arch = "cpu"\nglibc = "2.34"'))
    api.resolve(path)
    assert {p.platform: p.version for p in load_lock(tmp_path / "locks" / "cpu.conda-lock.yml").package} == {
        "linux-64": "1.1",
        "linux-aarch64": "1.0",
    }


def test_a_package_without_a_linux_wheel_fails(tmp_path: Path, index_url: str) -> None:
    with pytest.raises(Exception) as caught:
        api.resolve(stack(tmp_path, index_url, 'macos-only = "*"'))
    assert "macos-only" in str(caught.value) or "macos-only" in getattr(caught.value, "hint", "")
    assert not (tmp_path / "locks").exists()


def materialized(tmp_path: Path, index_url: str, deps: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    """A linux-64 pure-PyPI lock of `deps` from the local index, materialized into a fresh store."""
    from lockgen.api.materialize import materialize

    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    path = stack(tmp_path, index_url, deps)
    path.write_text(path.read_text().replace('platforms = ["linux-64", "linux-aarch64"]', 'platforms = ["linux-64"]'))
    api.resolve(path)
    return materialize(tmp_path / "locks" / "cpu.conda-lock.yml", None, None, lambda _: None)


@pytest.mark.slow
def test_materialize_a_pure_pypi_lock(tmp_path: Path, index_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from lockgen.api.check import check_prefix as check

    prefix, digest = materialized(tmp_path, index_url, 'gamma = "*"', monkeypatch)
    ran = subprocess.run(
        [str(prefix / "bin" / "python"), "-c", "import alpha, gamma; print(alpha.VERSION)"],
        capture_output=True,
        text=True,
    )
    assert ran.stdout.strip() == "1.0", ran.stderr
    assert check(prefix, full=True).clean and len(digest) == 64


@pytest.mark.slow
def test_a_pip_install_into_the_prefix_is_drift(
    tmp_path: Path, index_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lockgen.adapters.pypi.uv_resolver import uv_binary
    from lockgen.api.check import check_prefix as check

    prefix, _ = materialized(tmp_path, index_url, 'alpha = "*"', monkeypatch)
    subprocess.run(
        [uv_binary(), "pip", "install", "--python", str(prefix / "bin" / "python"), "--index-url", index_url, "delta"],
        check=True,
        capture_output=True,
    )
    drift = check(prefix, full=False)
    assert any(p.startswith("lib/python3.11/site-packages/delta") for p in drift.extra)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["climber", "scripter"])
def test_a_wheel_naming_paths_outside_the_prefix_writes_nothing_outside(
    tmp_path: Path, index_url: str, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lockgen.errors import LockgenError

    with pytest.raises(LockgenError) as raised:
        materialized(tmp_path, index_url, f'{name} = "*"', monkeypatch)
    assert "leaves the prefix" in raised.value.message and raised.value.hint
    assert not [p for p in tmp_path.rglob("climbed*")]
    assert not list((tmp_path / "home" / "envs").glob("*-cpu-linux-64"))


def test_an_update_that_moves_nothing_keeps_the_lock_bytes(tmp_path: Path, index_url: str) -> None:
    """`--update gamma` when gamma has no newer release: the same packages, so the lock stays byte for byte
    (the holds of that solve are no input of the stack: writing them would make the next plain resolve write
    the lock back), and the command says where gamma stays."""
    from tests.conftest import run_cli

    path = stack(tmp_path, index_url, 'gamma = "*"\nbeta = "*"')
    assert run_cli("resolve", str(path)).returncode == 0
    lock = tmp_path / "locks" / "cpu.conda-lock.yml"
    before = lock.read_bytes()
    updated = run_cli("resolve", str(path), "--update", "gamma")
    assert updated.returncode == 0, updated.stderr
    assert "cpu: gamma stays at 1.0 (the lock is unchanged)" in updated.stderr and f"unchanged {lock}" in updated.stderr
    assert lock.read_bytes() == before
    again = run_cli("resolve", str(path), "--update", "beta", "--json")  # each platform's own version
    assert '"unchanged": true' in again.stdout and "beta stays at 1.0" in again.stderr and lock.read_bytes() == before


def test_uv_is_found_by_threads_at_once_in_a_fresh_interpreter() -> None:
    """The platforms are resolved by threads at once; the first to look for uv fills Python 3.11's `sysconfig`
    variables unguarded, so another read `EXE` as None (exit 3 on a kept resolve). Found once, under a lock."""
    import subprocess
    import sys

    script = (
        "import threading\n"
        "from lockgen.adapters.pypi.uv_resolver import uv_binary\n"
        "found, start = [], threading.Barrier(8)\n"
        "def look():\n"
        "    start.wait()\n"
        "    try:\n"
        "        found.append(uv_binary())\n"
        "    except Exception as exc:\n"
        "        found.append(repr(exc))\n"
        "threads = [threading.Thread(target=look) for _ in range(8)]\n"
        "[thread.start() for thread in threads]\n"
        "[thread.join() for thread in threads]\n"
        "print(len(set(found)), found[0])\n"
    )
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    count, path = ran.stdout.split(maxsplit=1)
    assert count == "1" and path.strip().endswith("/uv"), ran.stdout
