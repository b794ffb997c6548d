"""A wheel a uv.lock or pylock.toml chose without a sha256 (two public uv.locks have such a torch wheel, from an
index that served none) is looked up on the index its package came from, a PEP 503 index the test builds and
serves on loopback (`tests.wheel_index`): the sha256 that page lists for the file of exactly that name pins it.
Where the index cannot be read or lists no such file, the import fails naming the package, with a hint naming
`--allow-partial`, which locks the rest and records what was left out. Before, the lock was written without the
package and the import exited 0."""

from __future__ import annotations

import hashlib
import socket
from pathlib import Path

import pytest

from lockgen.adapters.lock.lockfile_yaml import read_lock
from tests.conftest import run_cli
from tests.wheel_index import Wheel, served_index

KIT = Wheel("gpukit", "1.0")
OTHER = f'https://files.example/other-1.0-py3-none-any.whl", hash = "sha256:{"a" * 64}'


def _uv_lock(folder: Path, index: str, file_name: str) -> Path:
    source = folder / "uv.lock"
    source.write_text(
        'version = 1\nrevision = 2\nrequires-python = ">=3.11"\n\n[[package]]\nname = "tiny"\nversion = '
        '"0.1.0"\nsource = { virtual = "." }\n'
        'dependencies = [{ name = "gpukit" }, { name = "other" }]\n\n'
        f'[[package]]\nname = "gpukit"\nversion = "1.0"\nsource = {{ registry = "{index}" }}\nwheels = [{{ url = '
        f'"{index.removesuffix("/simple")}/files/{file_name}" }}]\n\n'
        '[[package]]\nname = "other"\nversion = "1.0"\nsource = { registry = "https://pypi.org/simple" '
        f'}}\nwheels = [{{ url = "{OTHER}" }}]\n'
    )
    return source


def _pylock(folder: Path, index: str, file_name: str) -> Path:
    source = folder / "pylock.toml"
    source.write_text(
        'lock-version = "1.0"\ncreated-by = "uv"\nrequires-python = ">=3.11"\n\n'
        f'[[packages]]\nname = "gpukit"\nversion = "1.0"\nindex = "{index}"\nwheels = [{{ url = '
        f'"{index.removesuffix("/simple")}/files/{file_name}" }}]\n\n'
        '[[packages]]\nname = "other"\nversion = "1.0"\nindex = "https://pypi.org/simple"\nwheels = [{ url = '
        f'"https://files.example/other-1.0-py3-none-any.whl", hashes = {{ sha256 = "{"a" * 64}" }} }}]\n'
    )
    return source


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("write", [_uv_lock, _pylock], ids=["uv.lock", "pylock"])
def test_a_wheel_without_a_hash_is_pinned_by_the_hash_its_index_lists_for_that_file(tmp_path: Path, write) -> None:
    with served_index(tmp_path / "index", [KIT]) as index:
        source = write(tmp_path, index, KIT.filename)
        result = run_cli("import", str(source), "-t", "t", "-o", str(tmp_path / "t.yml"), "--python", "3.11")
    assert result.returncode == 0, result.stderr
    expected = hashlib.sha256((tmp_path / "index" / "files" / KIT.filename).read_bytes()).hexdigest()
    lock = read_lock(tmp_path / "t.yml").lock
    kits = [p for p in lock.package if p.name == "gpukit"]
    assert {p.platform for p in kits} == {"linux-64", "linux-aarch64"}
    assert all(p.hash.sha256 == expected and p.url.endswith(f"/files/{KIT.filename}") for p in kits)
    assert "gpukit" not in lock.meta("skipped")


@pytest.mark.parametrize("write", [_uv_lock, _pylock], ids=["uv.lock", "pylock"])
def test_a_wheel_its_index_gives_no_hash_for_fails_the_import_unless_allow_partial(tmp_path: Path, write) -> None:
    """The index lists gpukit, but not the file of the name the lock gives (a hash of another file never pins
    it); an index that cannot be reached gives none either."""
    out = tmp_path / "t.yml"
    with served_index(tmp_path / "index", [KIT]) as index:
        other_file = write(tmp_path, index, "gpukit-1.0-py3-none-manylinux_2_17_x86_64.whl")
        refused = run_cli("import", str(other_file), "-t", "t", "-o", str(out), "--python", "3.11")
    assert refused.returncode == 1 and not out.exists(), refused.stderr
    assert (
        "gives no sha256 for `gpukit`" in refused.stderr and "lists no sha256 for a file of that name" in refused.stderr
    )
    assert "hint: import with --allow-partial" in refused.stderr and "Traceback" not in refused.stderr
    unreachable = write(tmp_path, f"http://127.0.0.1:{_closed_port()}/simple", KIT.filename)
    refused = run_cli("import", str(unreachable), "-t", "t", "-o", str(out), "--python", "3.11")
    assert refused.returncode == 1 and not out.exists(), refused.stderr
    assert "gives no sha256 for `gpukit`" in refused.stderr and "its index could not be read" in refused.stderr
    partial = run_cli("import", str(unreachable), "-t", "t", "-o", str(out), "--python", "3.11", "--allow-partial")
    assert partial.returncode == 0, partial.stderr
    assert "left out: " in partial.stderr and "linux-64: `gpukit` 1.0 has a wheel without a sha256" in partial.stderr
    lock = read_lock(out).lock
    assert {p.name for p in lock.package} == {"other"}
    assert any(
        line.startswith("linux-aarch64: `gpukit` 1.0 has a wheel without a sha256")
        for line in lock.meta("skipped").split("; ")
    )
