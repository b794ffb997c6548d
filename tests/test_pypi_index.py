"""Finding an installed distribution's wheel through a PEP 691 JSON index (loopback), and PyPI for six."""

from __future__ import annotations

import hashlib
import json

import pytest

from lockgen.adapters.pypi.pypi_index import JSON_TYPE, find_wheel
from lockgen.adapters.pypi.wheel_record import read_wheel_url
from lockgen.core.env.wheel_files import parse_wheel
from lockgen.errors import UserError
from tests.range_server import RangeServer, Site

MANYLINUX = "manylinux_2_17_x86_64.manylinux2014_x86_64"


def _entry(filename: str, body: bytes, url: str) -> dict:
    return {
        "filename": filename,
        "url": url,
        "hashes": {"sha256": hashlib.sha256(body).hexdigest()},
        "size": len(body),
        "yanked": False,
    }


@pytest.fixture
def index():
    server = RangeServer(Site())
    names = [
        "demo_pkg-1.0-py2.py3-none-any.whl",
        f"demo_pkg-2.0-cp312-cp312-{MANYLINUX}.whl",
        "demo_pkg-2.0-cp311-cp311-manylinux_2_17_x86_64.whl",
        "demo_pkg-2.0.tar.gz",
        "weird-name.whl",
    ]
    files = [_entry(n, n.encode(), f"../../files/{n}") for n in names]
    page = json.dumps({"meta": {"api-version": "1.1"}, "name": "demo-pkg", "files": files}).encode()
    server.site.files["/simple/demo-pkg/"] = (page, JSON_TYPE)
    server.site.files["/html/demo-pkg/"] = (b"<html></html>", "text/html")
    yield server
    server.stop()


def test_finds_the_wheel_covering_the_installed_tags(index):
    found = find_wheel(
        "Demo.Pkg",
        "2.0",
        ("cp312-cp312-manylinux2014_x86_64", "cp312-cp312-manylinux_2_17_x86_64"),
        index=f"{index.url}/simple",
    )
    assert found.filename == f"demo_pkg-2.0-cp312-cp312-{MANYLINUX}.whl"
    assert found.url == f"{index.url}/files/{found.filename}"
    assert found.sha256 == hashlib.sha256(found.filename.encode()).hexdigest() and found.size == len(found.filename)
    assert index.site.log[-1][0] == "/simple/demo-pkg/"
    pure = find_wheel("demo_pkg", "1.0", ("py3-none-any",), index=f"{index.url}/simple/")
    assert pure.filename == "demo_pkg-1.0-py2.py3-none-any.whl"


def test_nothing_matches_names_the_release_and_tags(index):
    with pytest.raises(
        UserError, match=r"no wheel of demo-pkg==2\.0 covers the installed tags cp313-cp313-linux_x86_64"
    ):
        find_wheel("demo-pkg", "2.0", ("cp313-cp313-linux_x86_64",), index=f"{index.url}/simple")
    with pytest.raises(UserError, match="HTTP 404"):
        find_wheel("absent", "1.0", ("py3-none-any",), index=f"{index.url}/simple")
    with pytest.raises(UserError, match="PEP 691"):
        find_wheel("demo-pkg", "1.0", ("py3-none-any",), index=f"{index.url}/html")


@pytest.mark.network
def test_six_from_pypi_by_ranges():
    found = find_wheel("six", "1.16.0", ("py2-none-any", "py3-none-any"))
    assert found.filename == "six-1.16.0-py2.py3-none-any.whl"
    assert found.sha256 == "8abb2f1d86890a2dfb989f9a77cfcfd3e47c2a354b01111771326f8aa26e0254"
    contents, fetched = read_wheel_url(found.url)
    assert contents.dist_info == "six-1.16.0.dist-info" and contents.wheel == parse_wheel(
        "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py2-none-any\nTag: py3-none-any\n"
    )
    assert {r.path for r in contents.record} == {
        "six.py",
        "six-1.16.0.dist-info/LICENSE",
        "six-1.16.0.dist-info/METADATA",
        "six-1.16.0.dist-info/WHEEL",
        "six-1.16.0.dist-info/top_level.txt",
        "six-1.16.0.dist-info/RECORD",
    }
    assert fetched.requests == 1 and fetched.bytes == found.size  # the 11 kB wheel fits in the first range
