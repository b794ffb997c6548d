"""Nothing a conda package names may reach outside its prefix: rattler links what `info/paths.json`,
`info/has_prefix` and noarch entry points say, so lockgen refuses the whole package before anything is
linked, and a file beside the environment is neither created, changed nor removed."""

from __future__ import annotations

from pathlib import Path

import pytest

from lockgen.api.materialize import materialize
from lockgen.errors import LockFormatError
from tests.channel_factory import Pkg, build_channel, cpu_lock


def _lock(tmp_path: Path, package: Pkg) -> Path:
    return cpu_lock(tmp_path, build_channel(tmp_path / "channel", [package]).as_uri(), [package.name])


@pytest.mark.parametrize(
    "package, message",
    [
        (Pkg("evil", "1.0", extra_paths=("../../victim.txt",)), "outside the prefix"),
        (Pkg("evil", "1.0", extra_paths=("../evil-1.0-0/x_pj",)), "outside the prefix"),
        (Pkg("evil", "1.0", extra_paths=("/etc/evil",)), "outside the prefix"),
        (
            Pkg("evil", "1.0", has_prefix="/opt/anaconda1anaconda2anaconda3 text ../../victim.txt\n"),
            "outside the prefix",
        ),
        (Pkg("evil", "1.0", extra_paths=("lib/up@", "lib/up/victim.txt")), "goes through its own link"),
        (
            Pkg(
                "evil",
                "1.0",
                subdir="noarch",
                entry_points=("../../victim.txt = os:system",),
                files={"site-packages/evil/__init__.py": ""},
            ),
            "not a file name in bin/",
        ),
    ],
)
def test_a_package_naming_paths_outside_is_refused_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, package: Pkg, message: str
) -> None:
    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    lock = _lock(tmp_path, package)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    before = {p.name for p in tmp_path.iterdir()}
    with pytest.raises(LockFormatError, match=message):
        materialize(lock, None, tmp_path / "envs" / "p", lambda _: None)
    assert victim.read_text() == "keep me\n"
    assert {p.name for p in tmp_path.iterdir()} - before <= {"envs", "home"}  # nothing else beside the prefix
    assert not (tmp_path / "envs" / "p").exists() and not list((tmp_path / "envs").glob(".p.tmp-*"))
    assert not list((tmp_path / "envs").glob(".p.lock"))  # the run's guard file goes with the run
    assert not [p.name for p in (tmp_path / "home" / "pkgs").iterdir()]  # the refused archive is not kept
