"""Reading a wheel's RECORD, WHEEL and scripts from a local file and by range requests from a loopback server."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from lockgen.adapters.pypi import wheel_record
from lockgen.adapters.pypi.wheel_record import check_sha256, read_wheel_file, read_wheel_url
from lockgen.errors import UserError
from tests.range_server import RangeServer, Site
from tests.wheel_index import Wheel, build_wheel

ENTRY_POINTS = "[console_scripts]\ndemo-tool = demo.cli:main\n"
# incompressible filler, so the small members sit beyond the first 64 KiB range
FILLER = hashlib.sha256(b"0").hexdigest() * 8000


def demo_wheel(folder: Path, big: bool = False) -> Path:
    files = {
        "demo/cli.py": "def main():\n    return 0\n",
        "demo-1.0.data/scripts/demo-sh": "#!python\nprint(1)\n",
        "demo-1.0.dist-info/entry_points.txt": ENTRY_POINTS,
    }
    if big:
        files["demo/filler.txt"] = FILLER
    return build_wheel(Wheel("demo", "1.0", tag="py2.py3-none-any", files=files), folder)


@pytest.fixture
def server():
    running = RangeServer(Site())
    yield running
    running.stop()


def test_local_wheel_contents(tmp_path):
    path = demo_wheel(tmp_path)
    contents = read_wheel_file(path, hashlib.sha256(path.read_bytes()).hexdigest())
    assert contents.dist_info == "demo-1.0.dist-info"
    assert contents.wheel.tags == ("py2-none-any", "py3-none-any")
    assert [s.name for s in contents.scripts] == ["demo-tool"]
    assert {r.path for r in contents.record} >= {
        "demo/cli.py",
        "demo-1.0.data/scripts/demo-sh",
        "demo-1.0.dist-info/RECORD",
    }
    with zipfile.ZipFile(path) as archive:
        cli = archive.read("demo/cli.py")
    assert next(r for r in contents.record if r.path == "demo/cli.py").sha256 == hashlib.sha256(cli).hexdigest()


def test_pinned_sha256_is_checked_before_the_record(tmp_path):
    path = demo_wheel(tmp_path)
    with pytest.raises(UserError, match="the lock pins"):
        read_wheel_file(path, "0" * 64)
    check_sha256(path, hashlib.sha256(path.read_bytes()).hexdigest().upper())


def test_two_dist_infos_refused(tmp_path):
    path = demo_wheel(tmp_path)
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr("other-2.0.dist-info/RECORD", "")
    with pytest.raises(UserError, match="2 dist-info"):
        read_wheel_file(path)


def test_small_wheel_in_one_request(tmp_path, server):
    site, base = server.site, server.url
    path = demo_wheel(tmp_path)
    site.files["/files/" + path.name] = (path.read_bytes(), "application/octet-stream")
    contents, fetched = read_wheel_url(f"{base}/files/{path.name}")
    assert contents == read_wheel_file(path)
    assert (fetched.requests, fetched.bytes, fetched.full_download) == (1, path.stat().st_size, False)


def test_large_wheel_reads_only_ranges(tmp_path, server):
    site, base = server.site, server.url
    path = demo_wheel(tmp_path, big=True)
    size = path.stat().st_size
    site.files["/w.whl"] = (path.read_bytes(), "application/octet-stream")
    with pytest.raises(UserError, match="another distribution"):
        read_wheel_url(f"{base}/w.whl")  # the file name names no distribution `demo`
    site.files["/demo-1.0-py2.py3-none-any.whl"] = site.files.pop("/w.whl")
    site.log.clear()
    contents, fetched = read_wheel_url(f"{base}/demo-1.0-py2.py3-none-any.whl")
    assert contents == read_wheel_file(path)
    assert size > 3 * wheel_record.TAIL and fetched.bytes < size / 2 and not fetched.full_download
    # the tail holds the central directory; the dist-info members sit at the front: one more range
    assert fetched.requests == len(site.log) == 2 and all(r for _, r, _ in site.log)


def test_server_ignoring_range_gives_a_bounded_full_download(tmp_path, server):
    site, base = server.site, server.url
    path = demo_wheel(tmp_path, big=True)
    site.files["/demo-1.0-py3-none-any.whl"] = (path.read_bytes(), "application/octet-stream")
    site.ignore_range = True
    url = f"{base}/demo-1.0-py3-none-any.whl"
    contents, fetched = read_wheel_url(url)
    assert fetched.full_download and fetched.requests == 1 and fetched.bytes == path.stat().st_size
    assert contents.dist_info == "demo-1.0.dist-info"
    with pytest.raises(UserError, match="larger than 1000 bytes"):
        read_wheel_url(url, max_download=1000)


def test_credentials_sent_but_never_shown(tmp_path, server):
    site, base = server.site, server.url
    path = demo_wheel(tmp_path)
    site.auth = "alice:s3cret"
    site.files["/t/tok123/demo-1.0-py3-none-any.whl"] = (path.read_bytes(), "application/octet-stream")
    host = base.removeprefix("http://")
    contents, _ = read_wheel_url(f"http://alice:s3cret@{host}/t/tok123/demo-1.0-py3-none-any.whl")
    assert contents.dist_info == "demo-1.0.dist-info"
    with pytest.raises(UserError) as caught:
        read_wheel_url(f"http://alice:wrong@{host}/t/tok123/demo-1.0-py3-none-any.whl")
    assert "401" in caught.value.message
    assert not any(s in caught.value.message + caught.value.hint for s in ("alice", "wrong", "tok123"))
    with pytest.raises(UserError) as missing:
        read_wheel_url(f"http://alice:s3cret@{host}/t/tok123/nothing-1.0-py3-none-any.whl")
    assert "404" in missing.value.message and "s3cret" not in missing.value.message
