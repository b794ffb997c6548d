"""The pack archive's pure rules (its members, its index) and its tar adapter, exhaustively: hypothesis for the index
parser and for damaged archives through `unpack`, and bad arguments through both commands (one `error:` line and a
`hint:`, exit 1 or 2, never a traceback, nothing written). GNU tar is the oracle of what the writer makes."""

from __future__ import annotations

import hashlib
import os
import subprocess
import tarfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from lockgen.adapters import pack_archive
from lockgen.api.pack import unpack
from lockgen.cli.app import app
from lockgen.core import pack_rules
from lockgen.errors import LockFormatError, LockgenError, PackError
from lockgen.model.lock import Lock, LockedPackage, LockMetadata, PackageHash
from lockgen.model.pack import PackMember
from tests.test_pack import conda_lock, good_archive  # noqa: F401  (module fixtures shared with the end-to-end tests)
from tests.wheel_index import Wheel

FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
SHA = "ab" * 32


def _package(
    name: str, manager: str = "conda", sha256: str | None = SHA, md5: str | None = None, url: str = ""
) -> LockedPackage:
    default = (
        f"https://conda.example/linux-64/{name}-1.0-h0_0.conda"
        if manager == "conda"
        else f"https://files.example/{name}-1.0-py3-none-any.whl"
    )
    return LockedPackage(
        name=name,
        version="1.0",
        manager=manager,
        platform="linux-64",
        url=url or default,  # type: ignore[arg-type]
        hash=PackageHash(sha256=sha256, md5=md5),
        build="h0_0" if manager == "conda" else None,
    )


def _lock(*packages: LockedPackage) -> Lock:
    return Lock(
        metadata=LockMetadata(content_hash={}, channels=(), platforms=("linux-64",), sources=(), custom_metadata={}),
        package=packages,
    )


def test_the_members_a_lock_makes() -> None:
    lock = _lock(_package("zeta"), _package("alpha", "pip", "cd" * 32), _package("beta"))
    assert [(e.path, e.sha256) for e in pack_rules.planned(lock, "linux-64")] == [
        ("conda/beta-1.0-h0_0.conda", SHA),
        ("conda/zeta-1.0-h0_0.conda", SHA),
        ("pypi/alpha-1.0-py3-none-any.whl", "cd" * 32),
    ]
    refusals = {
        "md5 alone": _lock(_package("a", sha256=None, md5="0" * 32)),
        "check-only": _lock(_package("a", "pip", url="unpublished:a==1.0")),
        "different sha256": _lock(_package("a"), _package("a", sha256="cd" * 32)),
        "no package for linux-aarch64": _lock(_package("a")),
    }
    for says, lock in refusals.items():
        with pytest.raises(LockFormatError) as raised:
            pack_rules.planned(lock, "linux-aarch64" if "aarch64" in says else "linux-64")
        assert says in raised.value.message and raised.value.hint


def _index(paths: list[str], sizes: list[int] | None = None) -> bytes:
    members = [PackMember(path=path, size=(sizes or [7] * len(paths))[i], sha256=SHA) for i, path in enumerate(paths)]
    return pack_rules.render_index("linux-64", members)


def test_an_index_against_its_lock() -> None:
    lock = _lock(_package("alpha"), _package("beta"))
    good = pack_rules.parse_index(
        _index([pack_rules.LOCK, "conda/alpha-1.0-h0_0.conda", "conda/beta-1.0-h0_0.conda"]), 100
    )
    assert [e.path for e in pack_rules.check_against_lock(good, lock, "linux-64")] == [
        "conda/alpha-1.0-h0_0.conda",
        "conda/beta-1.0-h0_0.conda",
    ]
    cases = {
        "conda/beta-1.0-h0_0.conda": [pack_rules.LOCK, "conda/alpha-1.0-h0_0.conda"],  # a pinned file left out
        "conda/gamma-1.0-h0_0.conda": [
            pack_rules.LOCK,
            "conda/alpha-1.0-h0_0.conda",
            "conda/beta-1.0-h0_0.conda",
            "conda/gamma-1.0-h0_0.conda",
        ],
    }  # a file the lock does not pin
    for member, paths in cases.items():
        with pytest.raises(PackError) as raised:
            pack_rules.check_against_lock(pack_rules.parse_index(_index(paths), 100), lock, "linux-64")
        assert raised.value.member == member and f"`{member}`" in raised.value.message
    other = _lock(_package("alpha", sha256="cd" * 32), _package("beta"))
    with pytest.raises(PackError) as raised:
        pack_rules.check_against_lock(good, other, "linux-64")
    assert raised.value.member == "conda/alpha-1.0-h0_0.conda" and "cd" * 32 in raised.value.message


@pytest.mark.parametrize(
    "paths, sizes, says",
    [
        (["conda/a-1-0.conda"], None, "does not name the lock"),
        ([pack_rules.LOCK, "conda/b-1-0.conda", "conda/a-1-0.conda"], None, "out of order"),
        ([pack_rules.LOCK, "conda/a-1-0.conda", "conda/a-1-0.conda"], None, "out of order or twice"),
        ([pack_rules.LOCK, "../etc/passwd"], None, "no member lockgen writes"),
        ([pack_rules.LOCK, "conda/sub/a.conda"], None, "no member lockgen writes"),
        ([pack_rules.LOCK, "conda/a-1-0.conda"], [7, 101], "101 bytes, outside 0..100"),
        ([pack_rules.LOCK], [pack_rules.MAX_LOCK + 1], "outside"),
    ],
)
def test_an_index_that_breaks_a_rule(paths: list[str], sizes: list[int] | None, says: str) -> None:
    with pytest.raises(PackError) as raised:
        pack_rules.parse_index(_index(paths, sizes), 100)
    assert says in raised.value.message and raised.value.member == pack_rules.INDEX


_PATHS = st.lists(
    st.from_regex(r"(conda|pypi)/[a-z][a-z0-9_.-]{0,30}\.(conda|whl)", fullmatch=True), unique=True, max_size=6
)


@FUZZ
@given(paths=_PATHS, data=st.data())
def test_the_index_reads_back_and_any_change_is_refused(paths: list[str], data: st.DataObject) -> None:
    rendered = _index([pack_rules.LOCK, *sorted(paths)])
    assert pack_rules.render_index("linux-64", list(pack_rules.parse_index(rendered, 1000).members)) == rendered
    at = data.draw(st.integers(0, len(rendered) - 1))
    kind = data.draw(st.sampled_from(["flip", "cut", "insert"]))
    changed = (
        rendered[:at] + bytes([rendered[at] ^ data.draw(st.integers(1, 255))]) + rendered[at + 1 :]
        if kind == "flip"
        else rendered[:at]
        if kind == "cut"
        else rendered[:at] + data.draw(st.binary(min_size=1, max_size=8)) + rendered[at:]
    )
    try:
        index = pack_rules.parse_index(changed, 1000)
    except PackError as error:
        assert error.message and "\n" not in error.message and error.hint and error.member == pack_rules.INDEX
    else:  # a change that still reads is a different canonical index, never the same one misread
        assert pack_rules.render_index(index.platform, list(index.members)) == changed != rendered


@FUZZ
@given(data=st.binary(max_size=400))
def test_any_bytes_as_an_index_are_one_clean_refusal(data: bytes) -> None:
    with pytest.raises(PackError) as raised:
        pack_rules.parse_index(data, 1000)
    assert "\n" not in raised.value.message and raised.value.hint


def test_the_writer_is_what_gnu_tar_reads_with_fixed_metadata(tmp_path: Path) -> None:
    long_name = (
        "pypi/" + "a" * 40 + "-1.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.manylinux_2_28_x86_64.whl"
    )
    source = tmp_path / "wheel"
    source.write_bytes(b"wheel bytes\n" * 1000)
    member = PackMember(
        path=long_name, size=source.stat().st_size, sha256=hashlib.sha256(source.read_bytes()).hexdigest()
    )
    written = []
    for name in ("one", "two"):
        out = tmp_path / name / "a.tar"
        sha256, size = pack_archive.write(out, [("lockgen-pack.json", b"{}\n")], [(member, source)])
        assert hashlib.sha256(out.read_bytes()).hexdigest() == sha256 and out.stat().st_size == size
        written.append(out.read_bytes())
    assert written[0] == written[1]
    listing = subprocess.run(
        ["tar", "-tvf", str(tmp_path / "one" / "a.tar"), "--numeric-owner"], capture_output=True, text=True, check=True
    ).stdout
    assert long_name in listing and listing.count("0/0") == 2 and "1970-01-01" in listing
    with tarfile.open(tmp_path / "one" / "a.tar") as tar:
        infos = tar.getmembers()
        assert [i.pax_headers for i in infos] == [{}, {"path": long_name}]  # the long name is the one pax record
        assert {(i.mtime, i.uid, i.gid, i.uname, i.gname, i.mode) for i in infos} == {(0, 0, 0, "", "", 0o644)}


def _no_leftovers(folder: Path) -> None:
    assert not list(folder.iterdir()), list(folder.iterdir())


def test_a_file_that_is_not_its_member_or_an_interrupt_leaves_nothing(tmp_path: Path) -> None:
    source = tmp_path / "in" / "f"
    source.parent.mkdir()
    source.write_bytes(b"x" * (3 << 20))
    out = tmp_path / "out" / "a.tar"
    out.parent.mkdir()
    wrong = PackMember(path="conda/f-1-0.conda", size=source.stat().st_size, sha256=SHA)
    with pytest.raises(PackError) as raised:
        pack_archive.write(out, [("lockgen-pack.json", b"{}\n")], [(wrong, source)])
    assert raised.value.member == "conda/f-1-0.conda"
    _no_leftovers(out.parent)
    right = wrong.model_copy(update={"sha256": hashlib.sha256(source.read_bytes()).hexdigest()})

    def interrupted(*_: object) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        pack_archive.write(out, [("lockgen-pack.json", b"{}\n")], [(right, source), (right, source)], interrupted)
    _no_leftovers(out.parent)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_damaged_archive_never_gets_past_the_reader_unnoticed(
    tmp_path_factory: pytest.TempPathFactory,
    good_archive: Path,  # noqa: F811
    data: st.DataObject,
) -> None:
    """Random flips, cuts and insertions through `unpack`: the environment, or one clean refusal and nothing at the
    prefix. (A flip in the tar's padding changes nothing that is read: that archive unpacks.)"""
    original = good_archive.read_bytes()
    at = data.draw(st.integers(0, len(original) - 1))
    kind = data.draw(st.sampled_from(["flip", "cut", "insert"]))
    damaged = (
        original[:at] + bytes([original[at] ^ data.draw(st.integers(1, 255))]) + original[at + 1 :]
        if kind == "flip"
        else original[:at]
        if kind == "cut"
        else original[:at] + data.draw(st.binary(min_size=1, max_size=600)) + original[at:]
    )
    root = tmp_path_factory.mktemp("fuzzed")
    archive = root / "a.tar"
    archive.write_bytes(damaged)
    prefix = root / "env"
    try:
        unpack(archive, prefix, None, None, lambda _: None)
    except LockgenError as error:
        assert error.message and "\n" not in error.message and error.hint
        assert not prefix.exists()
    else:
        assert (prefix / ".lockgen" / "manifest.json").is_file()


_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(platform=_TEXT, name=_TEXT, command=st.sampled_from(["pack", "unpack"]))
def test_bad_arguments_are_one_error_and_hint_or_a_usage_error(
    tmp_path_factory: pytest.TempPathFactory,
    good_archive: Path,  # noqa: F811
    conda_lock: tuple[Path, Path],  # noqa: F811
    platform: str,
    name: str,
    command: str,
) -> None:
    assume(platform.strip() not in ("", "linux-64"))
    root = tmp_path_factory.mktemp("arguments")
    target = root / "out" / (name.replace("/", "_").replace("\x00", "") or "x")
    given_path = str(root / "missing" / (name.replace("\x00", "") or "x"))
    cases = (
        [
            ["pack", str(conda_lock[0]), "--out", str(target), "--platform", platform],
            ["pack", given_path, "--out", str(target)],
        ]
        if command == "pack"
        else [
            ["unpack", str(good_archive), "--prefix", str(target), "--platform", platform],
            ["unpack", given_path, "--prefix", str(target)],
            ["unpack", str(good_archive), "--prefix", str(target), "--lock", given_path],
        ]
    )
    for args in cases:
        result = CliRunner().invoke(app, args)
        lines = result.stderr.strip().splitlines()
        assert result.exit_code in (1, 2), (args, result.exit_code, result.stderr, result.exception)
        assert "Traceback (most recent call last)" not in result.stderr  # the word alone may be the name given
        if result.exit_code == 1:
            assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: "), (
                args,
                result.stderr,
            )
        assert not target.exists()


def test_the_mirror_answers_https_wheel_urls_of_a_host_that_does_not_exist(tmp_path: Path) -> None:
    """uv (the oracle) installs a wheel by an https URL whose host has no address, through the mirror and its
    one-run authority: the same URL lands in direct_url.json; a URL the mirror was not given is refused (404)."""
    from lockgen.adapters.pypi import wheel_mirror
    from lockgen.adapters.pypi.uv_resolver import uv_binary
    from tests.wheel_index import build_wheel

    wheel = build_wheel(Wheel("alpha", "1.0"), tmp_path)
    url = "https://wheels.lockgen.invalid/packages/alpha-1.0-py3-none-any.whl"
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    subprocess.run([uv_binary(), "venv", "-q", str(tmp_path / "venv")], check=True)

    def install(requirement: str) -> subprocess.CompletedProcess[str]:
        (tmp_path / "req.txt").write_text(f"{requirement} --hash=sha256:{digest}\n")
        return subprocess.run(
            [
                uv_binary(),
                "pip",
                "install",
                "--python",
                str(tmp_path / "venv" / "bin" / "python"),
                "--no-deps",
                "--require-hashes",
                "--no-config",
                "--cache-dir",
                str(tmp_path / "uv-cache"),
                "-r",
                str(tmp_path / "req.txt"),
            ],
            capture_output=True,
            text=True,
        )

    before = {name: os.environ.get(name) for name in ("HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "SSL_CERT_FILE")}
    with wheel_mirror.serving({url: wheel}):
        refused = install(f"alpha @ {url.replace('/packages/', '/elsewhere/')}")
        installed = install(f"alpha @ {url}")
    assert refused.returncode != 0 and "404" in refused.stderr, refused.stderr
    assert installed.returncode == 0, installed.stderr
    recorded = tmp_path / "venv" / "lib" / "python3.11" / "site-packages" / "alpha-1.0.dist-info" / "direct_url.json"
    assert f'"url":"{url}"' in recorded.read_text()
    assert {name: os.environ.get(name) for name in before} == before  # the variables restored after
