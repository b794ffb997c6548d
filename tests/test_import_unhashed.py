"""A wheel a uv.lock, pylock.toml, pixi.lock or conda-lock.yml chose without a sha256 (two public uv.locks have
such a torch wheel, from an index that served none) is looked up where its package is listed, a PEP 503 index the
test builds and serves on loopback (`tests.wheel_index`): the sha256 that page lists for the file of exactly that
name pins it. uv.lock and pylock name the index per package; a pixi.lock names its environment's `indexes`, asked
in turn; conda-lock names none, and the wheel's own folder is asked (PyTorch's indexes serve their wheels beside
their project pages). Where the index cannot be read or lists no such file, or the wheel comes from a direct URL
(pixi's `direct+`, conda-lock's `source`), the import fails naming the package, with a hint naming
`--allow-partial`, which locks the rest and records what was left out. Before, the lock was written without the
package and the import exited 0 (uv.lock and pylock until the previous change; pixi.lock and conda-lock until
this one)."""

from __future__ import annotations

import contextlib
import hashlib
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from lockgen.adapters.lock.lockfile_yaml import read_lock
from tests.conftest import run_cli
from tests.wheel_index import Wheel, served_index

KIT = Wheel("gpukit", "1.0")
OTHER = f'https://files.example/other-1.0-py3-none-any.whl", hash = "sha256:{"a" * 64}'


def _uv_lock(folder: Path, index: str, file_name: str) -> Path:
    source = folder / "uv.lock"
    kit = f"{index.removesuffix('/simple')}/files/{file_name}"
    source.write_text(
        'version = 1\nrevision = 2\nrequires-python = ">=3.11"\n\n'
        '[[package]]\nname = "tiny"\nversion = "0.1.0"\nsource = { virtual = "." }\n'
        'dependencies = [{ name = "gpukit" }, { name = "other" }]\n\n'
        f'[[package]]\nname = "gpukit"\nversion = "1.0"\nsource = {{ registry = "{index}" }}\n'
        f'wheels = [{{ url = "{kit}" }}]\n\n'
        '[[package]]\nname = "other"\nversion = "1.0"\nsource = { registry = "https://pypi.org/simple" }\n'
        f'wheels = [{{ url = "{OTHER}" }}]\n'
    )
    return source


def _pylock(folder: Path, index: str, file_name: str) -> Path:
    source = folder / "pylock.toml"
    kit = f"{index.removesuffix('/simple')}/files/{file_name}"
    other = f'url = "https://files.example/other-1.0-py3-none-any.whl", hashes = {{ sha256 = "{"a" * 64}" }}'
    source.write_text(
        'lock-version = "1.0"\ncreated-by = "uv"\nrequires-python = ">=3.11"\n\n'
        f'[[packages]]\nname = "gpukit"\nversion = "1.0"\nindex = "{index}"\nwheels = [{{ url = "{kit}" }}]\n\n'
        '[[packages]]\nname = "other"\nversion = "1.0"\nindex = "https://pypi.org/simple"\n'
        f"wheels = [{{ {other} }}]\n"
    )
    return source


def _pixi_lock(folder: Path, index: str, file_name: str, *, url: str = "", indexes: tuple[str, ...] = ()) -> Path:
    """A pixi.lock v6 as pixi writes it (environments naming their channels, `indexes` and per-platform entries;
    one record per archive), with gpukit's record lacking the `sha256` pixi writes where its index gave one."""
    source = folder / "pixi.lock"
    kit = url or f"{index.removesuffix('/simple')}/files/{file_name}"
    other = "https://files.example/other-1.0-py3-none-any.whl"
    platforms = "".join(
        f"      {p}:\n      - pypi: {kit}\n      - pypi: {other}\n" for p in ("linux-64", "linux-aarch64")
    )
    named = "".join(f"    - {i}\n" for i in indexes or (index,))
    source.write_text(
        "version: 6\nenvironments:\n  default:\n    channels:\n    - url: https://conda.anaconda.org/conda-forge/\n"
        f"    indexes:\n{named}    packages:\n{platforms}packages:\n"
        f"- pypi: {kit}\n  name: gpukit\n  version: '1.0'\n  requires_python: '>=3.11'\n"
        f"- pypi: {other}\n  name: other\n  version: '1.0'\n  sha256: {'a' * 64}\n  requires_python: '>=3.8'\n"
    )
    return source


def _conda_lock(folder: Path, index: str, file_name: str, *, source_url: bool = False) -> Path:
    """A conda-lock.yml v1 as conda-lock writes a pip package its repository served without a hash (`hash: {}`),
    the wheel beside its project page as on PyTorch's indexes; `source_url` marks it a direct URL."""
    source = folder / "conda-lock.yml"
    kit = f"{index}/{file_name}"
    entries = ""
    for platform in ("linux-64", "linux-aarch64"):
        entries += (
            f"- name: gpukit\n  version: '1.0'\n  manager: pip\n  platform: {platform}\n"
            f"  dependencies:\n    other: '>=1.0'\n  url: {kit}\n  hash: {{}}\n"
            + (f"  source:\n    type: url\n    url: {kit}\n" if source_url else "")
            + "  category: main\n  optional: false\n"
            f"- name: other\n  version: '1.0'\n  manager: pip\n  platform: {platform}\n  dependencies: {{}}\n"
            f"  url: https://files.example/other-1.0-py3-none-any.whl\n  hash:\n    sha256: {'a' * 64}\n"
            "  category: main\n  optional: false\n"
        )
    source.write_text(
        "version: 1\nmetadata:\n  content_hash:\n    linux-64: x\n    linux-aarch64: x\n  channels:\n"
        "  - url: conda-forge\n    used_env_vars: []\n  platforms:\n  - linux-64\n  - linux-aarch64\n"
        f"  sources:\n  - environment.yml\npackage:\n{entries}"
    )
    return source


WRITERS = [_uv_lock, _pylock, _pixi_lock, _conda_lock]
FORMATS = ["uv.lock", "pylock", "pixi.lock", "conda-lock"]


def _python(write: object) -> list[str]:
    """`--python 3.11` for the PyPI locks, which are read for a Python; a conda-side lock takes no `--python`."""
    return ["--python", "3.11"] if write in (_uv_lock, _pylock) else []


@contextlib.contextmanager
def _refusing_port() -> Iterator[int]:
    """A loopback port bound and never listened on while the block runs: a connection is refused, and no other
    test's server can take the port meanwhile (one closed at once was, once, taken by a parallel worker's index)."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield int(held.getsockname()[1])


@pytest.mark.parametrize("write", WRITERS, ids=FORMATS)
def test_a_wheel_without_a_hash_is_pinned_by_the_hash_its_index_lists_for_that_file(tmp_path: Path, write) -> None:
    with served_index(tmp_path / "index", [KIT], beside=write is _conda_lock) as index:
        source = write(tmp_path, index, KIT.filename)
        result = run_cli("import", str(source), "-t", "t", "-o", str(tmp_path / "t.yml"), *_python(write))
    assert result.returncode == 0, result.stderr
    expected = hashlib.sha256(next((tmp_path / "index").rglob(KIT.filename)).read_bytes()).hexdigest()
    lock = read_lock(tmp_path / "t.yml").lock
    kits = [p for p in lock.package if p.name == "gpukit"]
    assert {p.platform for p in kits} == {"linux-64", "linux-aarch64"}
    assert all(p.hash.sha256 == expected and p.url.endswith(f"/{KIT.filename}") for p in kits)
    assert "gpukit" not in lock.meta("skipped")


@pytest.mark.parametrize("write", WRITERS, ids=FORMATS)
def test_a_wheel_its_index_gives_no_hash_for_fails_the_import_unless_allow_partial(tmp_path: Path, write) -> None:
    """The index lists gpukit, but not the file of the name the lock gives (a hash of another file never pins
    it); an index that cannot be reached gives none either."""
    out = tmp_path / "t.yml"
    with served_index(tmp_path / "index", [KIT], beside=write is _conda_lock) as index:
        other_file = write(tmp_path, index, "gpukit-1.0-py3-none-manylinux_2_17_x86_64.whl")
        refused = run_cli("import", str(other_file), "-t", "t", "-o", str(out), *_python(write))
    assert refused.returncode == 1 and not out.exists(), refused.stderr
    assert (
        "gives no sha256 for `gpukit`" in refused.stderr
        and "lists no sha256 for a file of that name at that URL" in refused.stderr
    )
    assert "hint: import with --allow-partial" in refused.stderr and "Traceback" not in refused.stderr
    with _refusing_port() as port:
        unreachable = write(tmp_path, f"http://127.0.0.1:{port}/simple", KIT.filename)
        refused = run_cli("import", str(unreachable), "-t", "t", "-o", str(out), *_python(write))
        assert refused.returncode == 1 and not out.exists(), refused.stderr
        assert "gives no sha256 for `gpukit`" in refused.stderr and "its index could not be read" in refused.stderr
        partial = run_cli("import", str(unreachable), "-t", "t", "-o", str(out), *_python(write), "--allow-partial")
    assert partial.returncode == 0, partial.stderr
    assert "left out: " in partial.stderr and "linux-64: `gpukit` 1.0 has a wheel without a sha256" in partial.stderr
    lock = read_lock(out).lock
    assert {p.name for p in lock.package} == {"other"}
    assert any(
        line.startswith("linux-aarch64: `gpukit` 1.0 has a wheel without a sha256")
        for line in lock.meta("skipped").split("; ")
    )


def test_a_conda_lock_wheel_pinned_from_its_index_keeps_what_its_entry_says(tmp_path: Path) -> None:
    """conda-lock's pip entry names its dependencies and category: pinned, it keeps them as a hashed entry would."""
    with served_index(tmp_path / "index", [KIT], beside=True) as index:
        source = _conda_lock(tmp_path, index, KIT.filename)
        result = run_cli("import", str(source), "-t", "t", "-o", str(tmp_path / "t.yml"))
    assert result.returncode == 0, result.stderr
    kits = [p for p in read_lock(tmp_path / "t.yml").lock.package if p.name == "gpukit"]
    assert len(kits) == 2 and all(p.dependencies == {"other": ">=1.0"} and p.category == "main" for p in kits)


def test_pixi_asks_its_environments_indexes_in_turn(tmp_path: Path) -> None:
    """An environment naming two indexes: the first serves no page for gpukit, the second lists its file."""
    with (
        served_index(tmp_path / "first", [Wheel("unrelated", "1.0")]) as first,
        served_index(tmp_path / "index", [KIT]) as second,
    ):
        source = _pixi_lock(tmp_path, second, KIT.filename, indexes=(first, second))
        result = run_cli("import", str(source), "-t", "t", "-o", str(tmp_path / "t.yml"))
        assert result.returncode == 0, result.stderr
        expected = hashlib.sha256((tmp_path / "index" / "files" / KIT.filename).read_bytes()).hexdigest()
        kits = [p for p in read_lock(tmp_path / "t.yml").lock.package if p.name == "gpukit"]
        assert len(kits) == 2 and all(p.hash.sha256 == expected for p in kits)
        source = _pixi_lock(tmp_path, second, "gpukit-1.0-py3-none-manylinux_2_17_x86_64.whl", indexes=(first, second))
        refused = run_cli("import", str(source), "-t", "t", "-o", str(tmp_path / "u.yml"))
    assert refused.returncode == 1 and not (tmp_path / "u.yml").exists(), refused.stderr
    assert (
        f"none of its indexes ({first}, {second}) lists a sha256 for a file of that name at that URL" in refused.stderr
    )


def test_a_hash_listed_for_a_file_of_that_name_at_another_url_pins_nothing(tmp_path: Path) -> None:
    """pixi's indexes A and B, the wheel's URL on B: A lists another file of the same name (its own build). Before,
    the first index listing the name pinned the wheel with A's hash, of a file the lock does not fetch."""
    impostor = Wheel("gpukit", "1.0", files={"gpukit/evil.py": "X = 1\n"})
    with (
        served_index(tmp_path / "first", [impostor]) as first,
        served_index(tmp_path / "index", [KIT]) as second,
    ):
        source = _pixi_lock(tmp_path, second, KIT.filename, indexes=(first, second))
        result = run_cli("import", str(source), "-t", "t", "-o", str(tmp_path / "t.yml"))
        assert result.returncode == 0, result.stderr
        expected = hashlib.sha256((tmp_path / "index" / "files" / KIT.filename).read_bytes()).hexdigest()
        assert expected != hashlib.sha256((tmp_path / "first" / "files" / KIT.filename).read_bytes()).hexdigest()
        kits = [p for p in read_lock(tmp_path / "t.yml").lock.package if p.name == "gpukit"]
        assert len(kits) == 2 and all(p.hash.sha256 == expected for p in kits)
        source = _pixi_lock(tmp_path, second, KIT.filename, indexes=(first,))
        refused = run_cli("import", str(source), "-t", "t", "-o", str(tmp_path / "u.yml"))
    assert refused.returncode == 1 and not (tmp_path / "u.yml").exists(), refused.stderr
    assert f"its index {first} lists no sha256 for a file of that name at that URL; a file of that name is listed" in (
        refused.stderr
    )
    assert f"at {first.removesuffix('/simple')}/files/{KIT.filename}, not at the lock's URL" in refused.stderr


def test_a_wheel_from_a_direct_url_without_a_hash_fails_the_import_unless_allow_partial(tmp_path: Path) -> None:
    """pixi marks a direct URL `direct+` (rattler_lock), conda-lock gives it a `source`: no index lists it, so no
    index is asked (the loopback index that would list it stays unasked)."""
    with served_index(tmp_path / "index", [KIT]) as index:
        sources = {
            "pixi.lock": _pixi_lock(tmp_path, index, KIT.filename, url=f"direct+{index}/{KIT.filename}"),
            "conda-lock": _conda_lock(tmp_path, index, KIT.filename, source_url=True),
        }
        for form, source in sources.items():
            out = tmp_path / f"imported-{form}.yml"
            refused = run_cli("import", str(source), "-t", "t", "-o", str(out))
            assert refused.returncode == 1 and not out.exists(), (form, refused.stderr)
            assert "gives no sha256 for `gpukit`" in refused.stderr, form
            assert "it comes from a direct URL, which no index lists" in refused.stderr, form
            partial = run_cli("import", str(source), "-t", "t", "-o", str(out), "--allow-partial")
            assert partial.returncode == 0, (form, partial.stderr)
            assert {p.name for p in read_lock(out).lock.package} == {"other"}, form


def test_an_explicit_file_conda_lock_renders_pins_its_pip_line_without_a_hash(tmp_path: Path) -> None:
    """conda-lock's own explicit render writes `# pip gpukit @ URL` with no `#sha256=` for a wheel it has no hash
    for: the import pins it from the wheel's folder, as for the conda-lock.yml it came from."""
    from conda_lock.conda_lock import render_lockfile_for_platform
    from conda_lock.lockfile import parse_conda_lock_file

    with served_index(tmp_path / "index", [KIT], beside=True) as index:
        lines = render_lockfile_for_platform(
            lockfile=parse_conda_lock_file(_conda_lock(tmp_path, index, KIT.filename)),
            include_dev_dependencies=True,
            extras=None,
            kind="explicit",
            platform="linux-64",
            suppress_warning_for_pip_and_explicit=True,
        )
        explicit = tmp_path / "conda-linux-64.lock"
        explicit.write_text("\n".join(lines) + "\n")
        assert f"# pip gpukit @ {index}/{KIT.filename}" in lines
        result = run_cli("import", str(explicit), "-t", "t", "-o", str(tmp_path / "t.yml"))
    assert result.returncode == 0, result.stderr
    expected = hashlib.sha256((tmp_path / "index" / "simple" / KIT.filename).read_bytes()).hexdigest()
    pips = {p.name: p.hash.sha256 for p in read_lock(tmp_path / "t.yml").lock.package}
    assert pips == {"gpukit": expected, "other": "a" * 64}


@pytest.mark.parametrize("direct", [False, True], ids=["indexed", "direct"])
def test_the_pixi_lock_these_tests_write_is_one_rattler_reads(tmp_path: Path, direct: bool) -> None:
    """The oracle for the pixi.lock text above: rattler's own reader (pixi's) reads it, both platforms with gpukit
    at the URL written (a direct one kept as `direct+`) and other pinned by its sha256."""
    import rattler

    url = "direct+http://127.0.0.1:1/files/gpukit-1.0-py3-none-any.whl" if direct else ""
    source = _pixi_lock(tmp_path, "http://127.0.0.1:1/simple", KIT.filename, url=url)
    environment = rattler.LockFile.from_path(source).default_environment()
    assert environment is not None
    platforms = environment.pypi_packages()
    assert {str(platform) for platform in platforms} == {"linux-64", "linux-aarch64"}
    for packages in platforms.values():
        by_name = {p.name: p for p in packages}
        assert set(by_name) == {"gpukit", "other"}
        assert by_name["gpukit"].location == (url or f"http://127.0.0.1:1/files/{KIT.filename}")
        assert by_name["other"].hashes.sha256 == bytes.fromhex("a" * 64)


def test_an_index_listing_a_sha256_that_is_not_one_is_named(tmp_path: Path) -> None:
    """An index page whose `#sha256=` is 64 characters but not hex digits: the import named "the foreign lock"
    as holding that value (the lock's own check caught it); the index that lists it is named now."""
    with served_index(tmp_path / "index", [KIT]) as index:
        page = tmp_path / "index" / "simple" / "gpukit" / "index.html"
        page.write_text(re.sub("#sha256=[0-9a-f]{64}", "#sha256=" + "z" * 64, page.read_text()))
        source = _pixi_lock(tmp_path, index, KIT.filename)
        refused = run_cli("import", str(source), "-t", "t", "-o", str(tmp_path / "t.yml"))
    assert refused.returncode == 1 and not (tmp_path / "t.yml").exists(), refused.stderr
    assert f"its index could not be read ({index}/gpukit/ lists {'z' * 64} as the sha256 of {KIT.filename}" in (
        refused.stderr
    )
    assert "the foreign lock holds this value" not in refused.stderr and "Traceback" not in refused.stderr


def test_a_pixi_direct_url_wheel_with_a_hash_is_imported_at_its_url(tmp_path: Path) -> None:
    """pixi marks a direct URL `direct+https://...`; with the sha256 pixi writes, the wheel is pinned like any
    other, at the URL after the mark (rattler's reading). Before, the whole import failed ("not an https, http or
    file URL")."""
    digest = "b" * 64
    url = f"https://files.example/{KIT.filename}"
    text = _pixi_lock(tmp_path, "http://127.0.0.1:1/simple", KIT.filename, url=f"direct+{url}").read_text()
    source = tmp_path / "pixi.lock"
    source.write_text(text.replace("  name: gpukit\n", f"  name: gpukit\n  sha256: {digest}\n"))
    done = run_cli("import", str(source), "-t", "t", "-o", str(tmp_path / "t.yml"))
    assert done.returncode == 0, done.stderr
    kits = [p for p in read_lock(tmp_path / "t.yml").lock.package if p.name == "gpukit"]
    assert len(kits) == 2 and all(p.url == url and p.hash.sha256 == digest for p in kits), kits


def test_a_pixi_environment_s_indexes_are_checked(tmp_path: Path) -> None:
    """`indexes` as a string was asked one character at a time; `indexes: []` was taken for pypi.org; where no
    index could be read, the import said none "lists a sha256"."""
    source = _pixi_lock(tmp_path, "http://127.0.0.1:1/simple", KIT.filename)
    text = source.read_text()
    source.write_text(
        text.replace("    indexes:\n    - http://127.0.0.1:1/simple\n", "    indexes: https://x.example\n")
    )
    refused = run_cli("import", str(source), "-t", "t", "-o", str(tmp_path / "t.yml"))
    assert refused.returncode == 1 and "Traceback" not in refused.stderr, refused.stderr
    assert "pixi environment `default`: `indexes` is 'https://x.example', not a list of index URLs" in refused.stderr
    source.write_text(text.replace("    indexes:\n    - http://127.0.0.1:1/simple\n", "    indexes: []\n"))
    refused = run_cli("import", str(source), "-t", "t", "-o", str(tmp_path / "t.yml"))
    assert refused.returncode == 1 and "its pixi environment names no index (`indexes: []`)" in refused.stderr
    with _refusing_port() as one, _refusing_port() as other:
        first, second = (f"http://127.0.0.1:{port}/simple" for port in (one, other))
        _pixi_lock(tmp_path, first, KIT.filename, indexes=(first, second))
        refused = run_cli("import", str(source), "-t", "t", "-o", str(tmp_path / "t.yml"))
    assert refused.returncode == 1 and not (tmp_path / "t.yml").exists(), refused.stderr
    assert f"none of its indexes ({first}, {second}) could be read; its index could not be read" in refused.stderr
    assert "lists a sha256" not in refused.stderr
