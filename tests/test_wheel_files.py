"""The wheel's own file statements: RECORD, WHEEL, entry_points.txt, placement, wheel names."""

from __future__ import annotations

import base64
import hashlib
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lockgen.core.env import wheel_files as wf
from lockgen.core.pypi.wheel_names import best_for_target, choose, parse_wheel_filename, target_tags
from lockgen.model.names import normalize
from lockgen.errors import UserError

SITE = "lib/python3.12/site-packages"
SCHEME = wf.Scheme(SITE, "3.12", "Demo-Pkg")


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def test_record_rows_hex_and_sizes():
    text = f"six.py,sha256={b64(b'x')},1\nsix-1.16.0.dist-info/RECORD,,\n"
    rows = wf.parse_record(text)
    assert rows == (
        wf.RecordRow("six.py", hashlib.sha256(b"x").hexdigest(), 1),
        wf.RecordRow("six-1.16.0.dist-info/RECORD", None, None),
    )
    assert wf.render_record(rows) == text


@pytest.mark.parametrize(
    "line",
    [
        "/etc/passwd,,",
        "../evil.py,,",
        "a/../../evil.py,,",
        "C:/x.py,,",
        "a.py,md5=abc,1",
        "a.py,sha256=!!,1",
        f"a.py,sha256={b64(b'x')}x,1",
        "a.py,,-1",
        "a.py",
        "a.py,,1,extra",
    ],
)
def test_record_refusals(line):
    with pytest.raises(UserError):
        wf.parse_record(line + "\n")


def test_installed_record_climbs_to_bin_but_not_out():
    rows = wf.parse_record("../../../bin/six-tool,,\n", base=SITE)
    assert wf.installed_to_prefix(rows[0].path, SITE) == "bin/six-tool"
    with pytest.raises(UserError, match="leaves the prefix"):
        wf.parse_record("../../../../etc/x,,\n", base=SITE)


def test_wheel_file_tags_expanded():
    info = wf.parse_wheel("Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py2.py3-none-any\nBuild: 1\n")
    assert info == wf.WheelInfo("1.0", True, ("py2-none-any", "py3-none-any"), "1")
    with pytest.raises(UserError):
        wf.parse_wheel("Wheel-Version: 1.0\nRoot-Is-Purelib: maybe\nTag: py3-none-any\n")


def test_entry_points_scripts_only():
    text = "[console_scripts]\nsix-tool = six.cli:main [extra]\n[gui_scripts]\nsixw=six:gui\n[other.group]\nx = y:z\n"
    assert wf.parse_entry_points(text) == (
        wf.ScriptEntry("six-tool", "six.cli:main", "console"),
        wf.ScriptEntry("sixw", "six:gui", "gui"),
    )
    with pytest.raises(UserError):
        wf.parse_entry_points("[console_scripts]\n../x = a:b\n")


@pytest.mark.parametrize(
    ("member", "placed"),
    [
        ("demo/__init__.py", f"{SITE}/demo/__init__.py"),
        ("demo-1.0.data/scripts/tool", "bin/tool"),
        ("demo-1.0.data/data/share/demo/a.txt", "share/demo/a.txt"),
        ("demo-1.0.data/purelib/x.py", f"{SITE}/x.py"),
        ("demo-1.0.data/platlib/x.so", f"{SITE}/x.so"),
        ("demo-1.0.data/headers/demo.h", "include/site/python3.12/Demo-Pkg/demo.h"),
    ],
)
def test_wheel_placement(member, placed):
    assert wf.wheel_to_prefix(member, SCHEME) == placed


# the last three: into lockgen's own record of the environment (found by an attack battery: a package's
# .lockgen/manifest.json was overwritten by the record, and every check of the environment then failed)
@pytest.mark.parametrize(
    "member",
    [
        "demo-1.0.data/bogus/x",
        "demo-1.0.data/data/../../../x",
        "../x",
        "demo-1.0.data/data/.lockgen/manifest.json",
        "demo-1.0.data/data/.lockgen",
        "demo-1.0.data/data/./.lockgen/services.json",
    ],
)
def test_wheel_placement_refusals(member):
    with pytest.raises(UserError):
        wf.wheel_to_prefix(member, SCHEME)


def test_expected_files_unhash_scripts():
    rows = (wf.RecordRow("demo-1.0.data/scripts/tool", "ab" * 32, 9), wf.RecordRow("demo.py", "cd" * 32, 3))
    assert wf.expected_files(rows, SCHEME) == (
        wf.RecordRow("bin/tool", None, None),
        wf.RecordRow(f"{SITE}/demo.py", "cd" * 32, 3),
    )


def test_wheel_filenames_and_choice():
    many = parse_wheel_filename("numpy-2.0.0-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl")
    assert many.tags == {"cp312-cp312-manylinux_2_17_x86_64", "cp312-cp312-manylinux2014_x86_64"}
    six = parse_wheel_filename("six-1.16.0-py2.py3-none-any.whl")
    built = parse_wheel_filename("six-1.16.0-1-py3-none-any.whl")
    assert built.build == "1" and normalize("Zope.Interface_x") == "zope-interface-x"
    assert choose([six, many], "Six", "1.16.0", ("py2-none-any", "py3-none-any")) is six
    plain = parse_wheel_filename("six-1.16.0-py3-none-any.whl")
    assert choose([six, plain], "six", "1.16.0", ("py3-none-any",)) is plain  # equal tags beat a superset
    with pytest.raises(UserError, match="2 wheels"):
        choose([plain, built], "six", "1.16.0", ("py3-none-any",))
    assert choose([plain, built], "six", "1.16.0", ("py3-none-any",), build="1") is built
    with pytest.raises(UserError, match=re.escape("no wheel of six==1.17.0 covers the installed tags py3-none-any")):
        choose([six], "six", "1.17.0", ("py3-none-any",))
    torch = [
        parse_wheel_filename(f"torch-2.5.1-cp312-cp312-{p}.whl")
        for p in ("manylinux1_x86_64", "manylinux2014_aarch64", "win_amd64")
    ]
    assert choose(torch, "torch", "2.5.1", ("cp312-cp312-linux_x86_64",)) is torch[0]  # renamed, not retagged
    with pytest.raises(UserError):
        choose(torch, "torch", "2.5.1", ("cp311-cp311-linux_x86_64",))
    for bad in ("six-1.16.0.tar.gz", "six-py3-none-any.whl", "six-1.0-x1-py3-none-any.whl"):
        with pytest.raises(UserError):
            parse_wheel_filename(bad)


# property tests: arbitrary text raises nothing but UserError; rows and tags round-trip
@settings(max_examples=300, deadline=None)
@given(st.text())
def test_parsers_raise_only_user_errors(text):
    for parse in (
        wf.parse_record,
        wf.parse_wheel,
        wf.parse_entry_points,
        wf.expand_tags,
        parse_wheel_filename,
        lambda t: wf.wheel_to_prefix(t, SCHEME),
        lambda t: wf.installed_to_prefix(t, SITE),
    ):
        try:
            parse(text)
        except UserError as exc:
            assert "\n" not in exc.message and "\n" not in exc.hint


_segment = st.text(
    st.characters(codec="utf-8", exclude_characters="/\x00\r\n", exclude_categories=("Cs",)), min_size=1, max_size=12
).filter(lambda s: s not in (".", ".."))
_rows = st.lists(
    st.builds(
        wf.RecordRow,
        st.lists(_segment, min_size=1, max_size=4).map("/".join),
        st.none() | st.binary(min_size=32, max_size=32).map(bytes.hex),
        st.none() | st.integers(0, 2**40),
    ),
    max_size=20,
)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(_rows)
def test_record_round_trips(rows):
    rows = [r for r in rows if not r.path.startswith("\\") and not (len(r.path) > 1 and r.path[1] == ":")]
    assert wf.parse_record(wf.render_record(rows)) == tuple(rows)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(st.from_regex(r"[a-z0-9_]{1,8}", fullmatch=True), min_size=1, max_size=3), min_size=3, max_size=3)
)
def test_compressed_tags_expand_to_the_product(parts):
    tags = wf.expand_tags("-".join(".".join(p) for p in parts))
    assert set(tags) == {f"{a}-{b}-{c}" for a in parts[0] for b in parts[1] for c in parts[2]}


@pytest.mark.parametrize(
    "files, glibc, expected",
    [
        (
            ["m-1-py310-none-any.whl", "m-1-py311-none-any.whl", "m-1-py312-none-any.whl", "m-1-py39-none-any.whl"],
            "2.28",
            "m-1-py312-none-any.whl",
        ),  # uv lists them by name: the first is Python 3.10's
        (
            [
                "n-2-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
                "n-2-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
            ],
            "2.28",
            "n-2-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
        ),
        (
            [
                "n-2-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
                "n-2-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
            ],
            "2.17",
            "n-2-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        ),
        (
            [
                "x-1-cp39-abi3-manylinux2014_x86_64.whl",
                "x-1-cp312-cp312-manylinux2014_x86_64.whl",
                "x-1-py3-none-any.whl",
            ],
            "2.28",
            "x-1-cp312-cp312-manylinux2014_x86_64.whl",
        ),
        (
            ["x-1-cp39-abi3-manylinux2014_x86_64.whl", "x-1-py3-none-any.whl"],
            "2.28",
            "x-1-cp39-abi3-manylinux2014_x86_64.whl",
        ),
        (["x-1-cp313-cp313-manylinux2014_x86_64.whl", "x-1-cp312-cp312-musllinux_1_2_x86_64.whl"], "2.28", None),
    ],
)
def test_the_wheel_an_installer_picks_on_the_target(files: list[str], glibc: str, expected: str | None) -> None:
    assert best_for_target(files, "3.12", "x86_64", glibc) == expected


@given(st.permutations([f"m-1-py3{v}-none-any.whl" for v in range(6, 13)]))
def test_the_wheel_chosen_does_not_depend_on_the_order_listed(files: list[str]) -> None:
    assert best_for_target(files, "3.12", "x86_64", "2.28") == "m-1-py312-none-any.whl"
    assert len(set(target_tags("3.12", "x86_64", "2.28"))) == len(target_tags("3.12", "x86_64", "2.28"))


def _inside_by_normpath(base: str, path: str) -> str | None:
    """The placement rule written plainly (normpath of every path): what `inside`'s shortcut must equal."""
    import posixpath

    if not path or "\x00" in path or path.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", path):
        return None
    joined = posixpath.normpath(posixpath.join(base, path)) if base else posixpath.normpath(path)
    return None if joined in (".", "..") or joined.startswith("../") else joined


_PARTS = st.lists(st.sampled_from(["a", "b.py", ".", "..", "", ".libs", "x.data", "scripts", "..x", "c:"]), max_size=6)


@settings(max_examples=400, deadline=None)
@given(_PARTS.map("/".join), st.sampled_from(["", SITE, "bin", "include/site/python3.12/..", "a/./b"]))
def test_placement_shortcut_is_normpath(path: str, base: str) -> None:
    expected = _inside_by_normpath(base, path)
    if expected is None:
        with pytest.raises(UserError):
            wf.inside(base, path)
    else:
        assert wf.inside(base, path) == expected


@settings(max_examples=300, deadline=None)
@given(_PARTS.map("/".join), st.sampled_from([SITE, "lib/python3.12/./site-packages", "", "lib/../x"]))
def test_a_wheel_member_lands_where_normpath_puts_it(path: str, site: str) -> None:
    clean = _inside_by_normpath("", path)
    data = clean is not None and clean.partition("/")[0].endswith(".data") and clean.partition("/")[2]
    if clean is None or data:
        return  # refused, or placed by its data scheme (other tests)
    expected = _inside_by_normpath(site, clean)
    scheme = wf.Scheme(site, "3.12", "Demo-Pkg")
    if expected is None:
        with pytest.raises(UserError):
            wf.wheel_to_prefix(path, scheme)
    else:
        assert wf.wheel_to_prefix(path, scheme) == expected


def test_an_installed_record_is_read_by_the_one_record_reader(tmp_path) -> None:
    """dist_info (an export's layer ownership, a scratch venv cut down to its wheels) reads RECORD through
    `parse_record`: the same rows, placed from site-packages, and a row leaving the prefix refused."""
    from lockgen.adapters.pypi.dist_info import recorded_files

    folder = tmp_path / "lib" / "python3.12" / "site-packages" / "x-1.dist-info"
    folder.mkdir(parents=True)
    empty = wf.record_hash_of_hex(hashlib.sha256(b"").hexdigest())
    (folder / "RECORD").write_text(f"x/__init__.py,{empty},0\n../../../bin/x,{empty},0\nx-1.dist-info/RECORD,,\n")
    assert recorded_files(tmp_path, folder) == [
        "lib/python3.12/site-packages/x/__init__.py",
        "bin/x",
        "lib/python3.12/site-packages/x-1.dist-info/RECORD",
    ]
    (folder / "RECORD").write_text("../../../../etc/passwd,,\n")
    with pytest.raises(UserError, match="leaves the prefix"):
        recorded_files(tmp_path, folder)
    (folder / "RECORD").unlink()
    assert recorded_files(tmp_path, folder) == []
