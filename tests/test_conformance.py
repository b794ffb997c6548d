"""The conformance comparison: expected files (the packages' own hashes) against an observed prefix."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lockgen.core.env.conformance import ExpectedFile, ExpectedPackage, ObservedFile, compare

SITE = "lib/python3.12/site-packages"
H1, H2 = "1" * 64, "2" * 64


def six() -> ExpectedPackage:
    return ExpectedPackage(
        "six 1.16.0",
        (
            ExpectedFile(f"{SITE}/six.py", H1, 10),
            ExpectedFile(f"{SITE}/six-1.16.0.dist-info/METADATA", H2, 5),
            ExpectedFile(f"{SITE}/six-1.16.0.dist-info/RECORD", None, None),
        ),
        dist_info=f"{SITE}/six-1.16.0.dist-info",
        scripts=("six-tool",),
    )


def idna() -> ExpectedPackage:
    return ExpectedPackage("idna 3.7", (ExpectedFile(f"{SITE}/idna/__init__.py", H1, 10),))


def as_found(package: ExpectedPackage) -> list[ObservedFile]:
    return [ObservedFile(f.path, "file", f.size or 0, 0o100644, f.sha256 or "9" * 64) for f in package.files]


def test_clean_environment_with_derived_files():
    observed = as_found(six()) + [
        ObservedFile(f"{SITE}/__pycache__/six.cpython-312.pyc", "file", 3, 0o100644, H1),
        ObservedFile(f"{SITE}/__pycache__/six.cpython-312.opt-1.pyc", "file", 3, 0o100644, H1),
        ObservedFile(f"{SITE}/six-1.16.0.dist-info/INSTALLER", "file", 3, 0o100644, H1),
        ObservedFile("bin/six-tool", "file", 3, 0o100755, H1),
        ObservedFile("pyvenv.cfg", "file", 3, 0o100644, H1),
        ObservedFile("bin/python3.12", "link", 3, 0o120777),
        ObservedFile("lib64", "dir-link", 3, 0o120777, target="lib"),
        ObservedFile("conda-meta/history", "file", 1, 0o100644, H1),
        ObservedFile(".lockgen/manifest.json", "file", 1, 0o100644, H1),
    ]
    report = compare([six()], observed, SITE)
    assert report.clean and report.lines() == ()
    assert {a.rule for a in report.accepted} == {"pyc", "dist-info", "entry-points", "venv", "conda-meta", "lockgen"}
    assert report.to_dict()["accepted"] == {
        "conda-meta": 1,
        "dist-info": 1,
        "entry-points": 1,
        "lockgen": 1,
        "pyc": 2,
        "venv": 3,
    }


def test_findings_and_their_lines():
    observed = as_found(six())
    observed[0] = ObservedFile(observed[0].path, "file", 10, 0o104755, "f" * 64)  # modified and setuid
    del observed[1]
    observed += [
        ObservedFile(f"{SITE}/evil.pyc", "file", 1, 0o100644, H1),
        ObservedFile(f"{SITE}/__pycache__/evil.cpython-312.pyc", "file", 1, 0o100644, H1),
        ObservedFile("lib64", "file", 1, 0o100666, H1),
    ]
    report = compare([six(), idna()], observed, SITE)
    assert not report.clean
    assert report.lines() == (
        "missing package idna 3.7",
        "six 1.16.0: modified six.py",
        "six 1.16.0: missing six-1.16.0.dist-info/METADATA",
        f"foreign: {SITE}/__pycache__/evil.cpython-312.pyc",
        f"foreign: {SITE}/evil.pyc",
        "foreign: lib64",
        f"mode: {SITE}/six.py is setuid, setgid, sticky, world-writable or carries file capabilities",
        "mode: lib64 is setuid, setgid, sticky, world-writable or carries file capabilities",
    )
    data = report.to_dict()
    assert json.loads(json.dumps(data)) == data
    assert data["counts"]["missing_packages"] == 1 and data["packages"][1]["status"] == "modified"


def test_clobber_and_link_kinds():
    a = ExpectedPackage(
        "a 1",
        (
            ExpectedFile("lib/libx.so", H1, 1),
            ExpectedFile("lib/libx.so.1", None, None, "link"),
            ExpectedFile("lib/ns.py", H1, 1),
        ),
    )
    b = ExpectedPackage(
        "b 2", (ExpectedFile("lib/libx.so", H2, 1), ExpectedFile("lib/ns.py", H1, 1))
    )  # ns.py: the same bytes
    c = ExpectedPackage("c 3", (ExpectedFile("lib/ns.py", H1, 1),))
    observed = [
        ObservedFile("lib/libx.so", "file", 1, 0o100644, H1),
        ObservedFile("lib/libx.so.1", "file", 1, 0o100644, H1),
        ObservedFile("lib/ns.py", "file", 1, 0o100644, H1),
    ]
    report = compare([a, b, c], observed)
    assert report.lines() == (
        "a 1: modified lib/libx.so.1",
        "b 2: modified lib/libx.so",
        "clobber: lib/libx.so (a 1, b 2)",
    )
    by_name = ExpectedPackage(
        "d 4", (ExpectedFile("lib/ns.py", None, None),)
    )  # no sha256: proves nothing about the bytes
    assert compare([a, by_name], observed).lines()[-1] == "clobber: lib/ns.py (a 1, d 4)"


_names = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True)
_files = st.dictionaries(
    st.lists(_names, min_size=1, max_size=3).map("/".join),
    st.tuples(st.binary(min_size=32, max_size=32).map(bytes.hex), st.integers(0, 1 << 30)),
    min_size=1,
    max_size=12,
)


def _packages(files: dict[str, tuple[str, int]], split: int) -> list[ExpectedPackage]:
    items = sorted(files.items())
    cut = split % len(items)
    groups = [items[:cut], items[cut:]]
    return [
        ExpectedPackage(f"p{i} 1.0", tuple(ExpectedFile(p, h, s) for p, (h, s) in g)) for i, g in enumerate(groups) if g
    ]


def _observed(files: dict[str, tuple[str, int]]) -> list[ObservedFile]:
    return [ObservedFile(p, "file", s, 0o100644, h) for p, (h, s) in files.items()]


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(_files, st.integers(0, 100))
def test_observed_equal_to_expected_is_clean(files, split):
    report = compare(_packages(files, split), _observed(files))
    assert report.clean and report.counts["files_expected"] == report.counts["files_observed"] == len(files)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    _files, st.integers(0, 100), st.integers(0, 100), st.sampled_from(["hash", "size", "delete", "add", "mode", "kind"])
)
def test_any_single_change_is_detected(files, split, which, change):
    observed = _observed(files)
    index = which % len(observed)
    item = observed[index]
    if change == "hash":
        observed[index] = ObservedFile(
            item.path, "file", item.size, item.mode, "0" * 64 if item.sha256 != "0" * 64 else "1" * 64
        )
    elif change == "size":
        observed[index] = ObservedFile(item.path, "file", item.size + 1, item.mode, item.sha256)
    elif change == "delete":
        del observed[index]
    elif change == "add":
        observed.append(ObservedFile(item.path + "_x/evil.py", "file", 1, 0o100644, "0" * 64))
    elif change == "mode":
        observed[index] = ObservedFile(item.path, "file", item.size, item.mode | 0o002, item.sha256)
    else:
        observed[index] = ObservedFile(item.path, "link", item.size, 0o120777)
    report = compare(_packages(files, split), observed)
    assert not report.clean and report.lines()


def test_a_clobber_names_every_owner():
    """Two packages stating the same bytes and a third other bytes: all three own the clobber."""
    a, b, c = (
        ExpectedPackage(key, (ExpectedFile("lib/ns.py", digest, 1),))
        for key, digest in (("a 1", H1), ("b 2", H1), ("c 3", H2))
    )
    report = compare([a, b, c], [ObservedFile("lib/ns.py", "file", 1, 0o100644, H1)])
    assert [(c.path, c.owners) for c in report.clobbered] == [("lib/ns.py", ("a 1", "b 2", "c 3"))]
