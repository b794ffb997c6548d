"""`lockgen pack` and `lockgen unpack` end to end: a conda lock (real archives on a file:// channel the tests build)
and a pure-PyPI lock (real wheels on a loopback index) packed in one home, unpacked in a fresh one with the network
cut (a new network namespace with loopback only, `unshare --net`, and the channel removed or the index stopped),
giving exactly the environment digest and manifest of `lockgen materialize`; the same archive bytes from two homes;
GNU tar as the oracle of the format; every kind of damage refused naming the member, exit 1, nothing at the prefix."""

from __future__ import annotations

import functools
import hashlib
import http.server
import io
import os
import shutil
import subprocess
import tarfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from lockgen.adapters.store import env_manifest
from lockgen.api import resolve as resolve_api
from tests.channel_factory import Pkg, build_channel
from tests.conftest import _QuietHandler, run_cli
from tests.test_tar_headers import long_name, pax
from tests.wheel_index import Wheel, build_index


def _netless_prefix() -> list[str]:
    """The command prefix that runs a command in a new network namespace whose one interface is loopback (root
    only). Where that cannot be made, none: the lock's URLs are then unreachable only because the tests removed
    the channel and stopped the index (`test_the_network_is_really_cut` says which held)."""
    probe = subprocess.run(["unshare", "--net", "true"], capture_output=True)
    if probe.returncode != 0:
        return []
    return ["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$@"', "netless"]


NETLESS = _netless_prefix()


def netless_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    import sys

    full = {**os.environ, "NO_COLOR": "1", **env}
    return subprocess.run([*NETLESS, sys.executable, "-m", "lockgen", *args], capture_output=True, text=True, env=full)


def test_the_network_is_really_cut() -> None:
    """As root (this machine, CI) the unpack runs in a namespace with no route out; the fallback is for others."""
    if os.geteuid() == 0:
        assert NETLESS, "unshare --net fails as root: the offline tests would not prove offline"
    if NETLESS:
        import sys

        reach = subprocess.run(
            [*NETLESS, sys.executable, "-c", "import socket; socket.create_connection(('1.1.1.1', 53), 3)"],
            capture_output=True,
            text=True,
        )
        assert reach.returncode != 0 and "unreachable" in reach.stderr.lower(), reach.stderr


def _home(root: Path, name: str) -> dict[str, str]:
    return {
        "LOCKGEN_HOME": str(root / name),
        "LOCKGEN_CACHE_DIR": str(root / f"{name}-cache"),
        "UV_CACHE_DIR": str(root / f"{name}-uv"),
    }


def _materialized(lock: Path, prefix: Path, env: dict[str, str]) -> tuple[str, dict]:
    done = run_cli("materialize", str(lock), "--prefix", str(prefix), "--json", env=env)
    assert done.returncode == 0, done.stderr
    digest = yaml.safe_load(done.stdout)["environment_digest"]
    manifest, _ = env_manifest.read(prefix)
    shutil.rmtree(prefix)
    return digest, manifest


def _same_environment(
    root: Path,
    lock: Path,
    archive: Path,
    prefix: Path,
    packed_env: dict[str, str],
    make_unreachable: Callable[[], None],
) -> None:
    """Materialize in the packing home, then unpack in a fresh home with the lock's URLs out of reach: one digest,
    one manifest."""
    digest, manifest = _materialized(lock, prefix, packed_env)
    make_unreachable()
    fresh = _home(root, "air-gapped")
    done = netless_cli("unpack", str(archive), "--prefix", str(prefix), "--lock", str(lock), "--json", env=fresh)
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load(done.stdout)["environment_digest"] == digest
    assert env_manifest.read(prefix)[0] == manifest
    assert run_cli("check", "--prefix", str(prefix), "--full", env=fresh).returncode == 0
    assert not list((root / "air-gapped" / "unpack").iterdir())  # the staging folder is gone


def _pack_twice(root: Path, lock: Path) -> Path:
    """Packs `lock` in two homes into two folders; asserts the same bytes; returns the first archive."""
    archives = []
    for name in ("packer", "second-packer"):
        out = root / f"{name}-out" / "stack.tar"
        done = run_cli("pack", str(lock), "--out", str(out), env=_home(root, name))
        assert done.returncode == 0 and done.stdout.strip() == str(out), done.stderr
        archives.append(out.read_bytes())
    assert archives[0] == archives[1]
    return root / "packer-out" / "stack.tar"


def _tar_oracle(archive: Path, lock: Path, folder: Path) -> list[str]:
    """GNU tar's view: the members in order, each regular, owned 0/0, dated 1970; extracted, each has the sha256
    the lock pins (the lock itself byte for byte)."""
    listing = subprocess.run(
        ["tar", "--list", "--verbose", "--numeric-owner", "--full-time", "-f", str(archive)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert all(line.startswith("-rw-r--r-- 0/0") and " 1970-01-01 00:00:00 " in line for line in listing), listing
    names = [line.rsplit(" ", 1)[1] for line in listing]
    folder.mkdir()
    subprocess.run(["tar", "-xf", str(archive), "-C", str(folder)], check=True)
    assert (folder / "lock.conda-lock.yml").read_bytes() == lock.read_bytes()
    pins = {p["url"].rsplit("/", 1)[1]: p["hash"]["sha256"] for p in yaml.safe_load(lock.read_text())["package"]}
    for name in names[2:]:
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == pins[name.split("/", 1)[1]]
    return names


@pytest.fixture(scope="module")
def conda_lock(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(lock, channel): two real packages, a `.conda` with a prefix placeholder and a noarch `.tar.bz2`."""
    root = tmp_path_factory.mktemp("conda-stack")
    channel = build_channel(
        root / "channel",
        [
            Pkg("libfoo", "1.0", files={"lib/libfoo.txt": "foo\n", "bin/foo": "#!/bin/sh\necho foo\n"}),
            Pkg("foo-data", "2.0", subdir="noarch", archive=".tar.bz2", depends=("libfoo",)),
        ],
    )
    stack = root / "stack" / "stack.toml"
    stack.parent.mkdir()
    stack.write_text(
        f'[stack]\nname = "tiny"\nchannels = ["{channel.as_uri()}"]\n[dependencies]\nfoo-data = '
        '"*"\n[targets.cpu]\narch = "cpu"\n'
    )
    resolve_api.resolve(stack)
    return stack.parent / "locks" / "cpu.conda-lock.yml", channel


@pytest.mark.slow
def test_a_conda_lock_unpacked_offline_is_what_materialize_makes(tmp_path: Path, conda_lock: tuple[Path, Path]) -> None:
    lock, channel = conda_lock
    archive = _pack_twice(tmp_path, lock)
    names = _tar_oracle(archive, lock, tmp_path / "extracted")
    assert names == [
        "lockgen-pack.json",
        "lock.conda-lock.yml",
        "conda/foo-data-2.0-h0_0.tar.bz2",
        "conda/libfoo-1.0-h0_0.conda",
    ]
    hidden = channel.with_name("channel-moved-away")

    def remove_channel() -> None:
        channel.rename(hidden)

    try:
        _same_environment(tmp_path, lock, archive, tmp_path / "env", _home(tmp_path, "packer"), remove_channel)
    finally:
        if hidden.exists():
            hidden.rename(channel)


@pytest.fixture
def pypi_lock(tmp_path: Path) -> Iterator[tuple[Path, Callable[[], None]]]:
    """(lock, stop): a pure-PyPI lock of two wheels (one needs the other) from a loopback index, and a way to stop
    it."""
    root = build_index(tmp_path / "index", [Wheel("alpha", "1.0"), Wheel("gamma", "1.0", requires=("alpha",))])
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    stack = tmp_path / "stack" / "stack.toml"
    stack.parent.mkdir()
    stack.write_text(
        '[stack]\nname = "wheels"\npython = "3.11"\nplatforms = ["linux-64"]\n[pypi-dependencies]\ngamma = "*"\n'
        f'[pypi-options]\nindex-url = "http://127.0.0.1:{server.server_address[1]}/simple"\n[targets.cpu]\narch '
        '= "cpu"\n'
    )
    stopped = []

    def stop() -> None:
        server.shutdown()
        server.server_close()
        stopped.append(True)

    try:
        resolve_api.resolve(stack)
        yield stack.parent / "locks" / "cpu.conda-lock.yml", stop
    finally:
        if not stopped:
            stop()


@pytest.mark.slow
def test_a_pure_pypi_lock_unpacked_offline_is_what_materialize_makes(
    tmp_path: Path, pypi_lock: tuple[Path, Callable[[], None]]
) -> None:
    lock, stop = pypi_lock
    archive = _pack_twice(tmp_path, lock)
    assert _tar_oracle(archive, lock, tmp_path / "extracted")[2:] == [
        "pypi/alpha-1.0-py3-none-any.whl",
        "pypi/gamma-1.0-py3-none-any.whl",
    ]
    prefix = tmp_path / "env"
    _same_environment(tmp_path, lock, archive, prefix, _home(tmp_path, "packer"), stop)
    ran = subprocess.run(
        [str(prefix / "bin" / "python"), "-c", "import alpha, gamma; print(alpha.VERSION)"],
        capture_output=True,
        text=True,
    )
    assert ran.stdout.strip() == "1.0", ran.stderr
    direct_url = prefix / "lib" / "python3.11" / "site-packages" / "alpha-1.0.dist-info" / "direct_url.json"
    assert "/files/alpha-1.0-py3-none-any.whl" in direct_url.read_text()  # the lock's URL, as materialize records it


@pytest.mark.slow
def test_a_damaged_wheel_is_refused_before_uv_runs(tmp_path: Path, pypi_lock: tuple[Path, Callable[[], None]]) -> None:
    lock, stop = pypi_lock
    archive = tmp_path / "a.tar"
    assert run_cli("pack", str(lock), "--out", str(archive), env=_home(tmp_path, "packer")).returncode == 0
    stop()
    damaged = tmp_path / "damaged.tar"
    damaged.write_bytes(_flipped(archive.read_bytes(), _data_offset(archive, "pypi/gamma-1.0-py3-none-any.whl") + 40))
    done = netless_cli("unpack", str(damaged), "--prefix", str(tmp_path / "env"), env=_home(tmp_path, "fresh"))
    _refused(done, "pypi/gamma-1.0-py3-none-any.whl", tmp_path / "env")
    assert not (tmp_path / "fresh" / "wheels").exists()  # nothing was taken into a store


# --- damage ---------------------------------------------------------------------------------------------------


def _data_offset(archive: Path, name: str) -> int:
    with tarfile.open(archive) as tar:
        return tar.getmember(name).offset_data


def _header_offset(archive: Path, name: str) -> int:
    with tarfile.open(archive) as tar:
        return tar.getmember(name).offset


def _flipped(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x20]) + data[at + 1 :]


def _members(archive: Path) -> list[tuple[tarfile.TarInfo, bytes]]:
    with tarfile.open(archive) as tar:
        return [(info, tar.extractfile(info).read()) for info in tar.getmembers()]  # type: ignore[union-attr]


def _rewritten(
    archive: Path, edit: Callable[[list[tuple[tarfile.TarInfo, bytes]]], list[tuple[tarfile.TarInfo, bytes]]]
) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in edit(_members(archive)):
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return buffer.getvalue()


def _renamed(members, old: str, new: str):  # type: ignore[no-untyped-def]
    for info, _ in members:
        if info.name == old:
            info.name = new
    return members


def _extra(members, info_name: str, kind: bytes = tarfile.REGTYPE):  # type: ignore[no-untyped-def]
    info = tarfile.TarInfo(info_name)
    info.type, info.size = kind, (0 if kind != tarfile.REGTYPE else 3)
    if kind == tarfile.SYMTYPE:
        info.linkname = "/etc/passwd"
    return [*members, (info, b"abc" if kind == tarfile.REGTYPE else b"")]


LIBFOO, FOO_DATA, LOCK, INDEX = (
    "conda/libfoo-1.0-h0_0.conda",
    "conda/foo-data-2.0-h0_0.tar.bz2",
    "lock.conda-lock.yml",
    "lockgen-pack.json",
)
DAMAGE: dict[str, tuple[Callable[[Path], bytes], str]] = {
    "a flipped byte in an artifact": (lambda a: _flipped(a.read_bytes(), _data_offset(a, LIBFOO) + 100), LIBFOO),
    "a flipped byte in the index": (lambda a: _flipped(a.read_bytes(), _data_offset(a, INDEX) + 60), INDEX),
    "a flipped byte in the lock": (lambda a: _flipped(a.read_bytes(), _data_offset(a, LOCK) + 300), LOCK),
    # named as its damaged header reads: the header rule refuses its checksum before any member is read
    "a flipped byte in a member's header": (
        lambda a: _flipped(a.read_bytes(), _header_offset(a, LIBFOO) + 3),
        _flipped(LIBFOO.encode(), 3).decode(),
    ),
    "cut short inside the last member": (lambda a: a.read_bytes()[: _data_offset(a, LIBFOO) + 200], LIBFOO),
    "cut short before the last member": (lambda a: a.read_bytes()[: _header_offset(a, LIBFOO)], LIBFOO),
    "a member missing": (lambda a: _rewritten(a, lambda m: [x for x in m if x[0].name != FOO_DATA]), FOO_DATA),
    "the lock missing": (lambda a: _rewritten(a, lambda m: [x for x in m if x[0].name != LOCK]), LOCK),
    "an extra member": (
        lambda a: _rewritten(a, lambda m: _extra(m, "conda/evil-1.0-0.conda")),
        "conda/evil-1.0-0.conda",
    ),
    "a member renamed": (
        lambda a: _rewritten(a, lambda m: _renamed(m, LIBFOO, "conda/libfoo-1.1-h0_0.conda")),
        "conda/libfoo-1.1-h0_0.conda",
    ),
    "a link added": (lambda a: _rewritten(a, lambda m: _extra(m, "conda/link", tarfile.SYMTYPE)), "conda/link"),
    "a member out of the folder": (lambda a: _rewritten(a, lambda m: _extra(m, "../escape")), "../escape"),
    "an absolute member": (
        lambda a: _rewritten(a, lambda m: _extra(m, "/tmp/lockgen-absolute")),
        "/tmp/lockgen-absolute",
    ),
    "not a tar at all": (lambda a: b"PK\x03\x04" + a.read_bytes()[4:1000], INDEX),
}


@pytest.fixture(scope="module")
def good_archive(tmp_path_factory: pytest.TempPathFactory, conda_lock: tuple[Path, Path]) -> Path:
    root = tmp_path_factory.mktemp("good-archive")
    out = root / "good.tar"
    done = run_cli("pack", str(conda_lock[0]), "--out", str(out), env=_home(root, "home"))
    assert done.returncode == 0, done.stderr
    return out


def _refused(done: subprocess.CompletedProcess[str], member: str, prefix: Path) -> None:
    lines = done.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("error: ")]
    assert done.returncode == 1, done.stderr
    assert len(errors) == 1 and f"`{member}`" in errors[0] and lines[-1].startswith("hint: "), done.stderr
    assert "Traceback" not in done.stderr
    assert not prefix.exists() and not list(prefix.parent.glob(f".{prefix.name}.*"))


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_archive_is_refused_naming_the_member(tmp_path: Path, good_archive: Path, damage: str) -> None:
    make, member = DAMAGE[damage]
    damaged = tmp_path / "damaged.tar"
    damaged.write_bytes(make(good_archive))
    prefix = tmp_path / "env"
    done = netless_cli("unpack", str(damaged), "--prefix", str(prefix), env=_home(tmp_path, "fresh"))
    _refused(done, member, prefix)
    assert not (tmp_path / "fresh" / "pkgs").exists()  # nothing taken into the store from a refused archive


def test_a_member_named_two_ways_is_refused_before_any_member_is_read(tmp_path: Path, good_archive: Path) -> None:
    """A GNU long name and then a PAX path before an artifact's header: Python's tarfile takes the long name (the
    artifact's own, so lockgen unpacked the archive as honest), GNU tar the PAX path (the oracle: a path out of the
    folder it extracts into). The header rule refuses the archive naming the member, before any member is read."""
    outside = "../../outside-the-folder.conda"
    at = _header_offset(good_archive, LIBFOO)
    data = good_archive.read_bytes()
    forged = tmp_path / "forged.tar"
    forged.write_bytes(data[:at] + long_name(LIBFOO.encode()) + pax(path=outside) + data[at:])
    listed = subprocess.run(["tar", "-tf", str(forged)], capture_output=True, text=True).stdout.splitlines()
    assert outside in listed and LIBFOO not in listed, listed  # GNU tar's reading
    with tarfile.open(forged) as tar:  # Python's reading
        assert LIBFOO in tar.getnames() and outside not in tar.getnames()
    prefix = tmp_path / "env"
    done = netless_cli("unpack", str(forged), "--prefix", str(prefix), env=_home(tmp_path, "fresh"))
    _refused(done, LIBFOO, prefix)
    assert "read differently to different tar readers" in done.stderr and "after another extended header" in done.stderr
    assert not (tmp_path / "fresh").exists() or not any(
        (tmp_path / "fresh").rglob("*.conda")
    )  # no member was taken anywhere


def test_another_lock_platform_or_prefix_is_refused(
    tmp_path: Path, good_archive: Path, conda_lock: tuple[Path, Path]
) -> None:
    other = tmp_path / "other.conda-lock.yml"
    other.write_bytes(conda_lock[0].read_bytes().replace(b"# This lock", b"# this lock", 1))
    prefix = tmp_path / "env"
    env = _home(tmp_path, "fresh")
    _refused(run_cli("unpack", str(good_archive), "--prefix", str(prefix), "--lock", str(other), env=env), LOCK, prefix)
    wrong = run_cli("unpack", str(good_archive), "--prefix", str(prefix), "--platform", "linux-aarch64", env=env)
    assert wrong.returncode == 1 and "--platform linux-64" in wrong.stderr and not prefix.exists(), wrong.stderr
    prefix.mkdir()
    (prefix / "mine.txt").write_text("keep\n")
    taken = run_cli("unpack", str(good_archive), "--prefix", str(prefix), env=env)
    assert taken.returncode == 1 and "not a lockgen environment" in taken.stderr
    assert [p.name for p in prefix.iterdir()] == ["mine.txt"]
