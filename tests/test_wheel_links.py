"""Wheels placed from lockgen's store by lockgen itself, in one pass, with uv as the oracle: a lock whose wheels uv
installed into a fresh venv and lockgen proved before is placed again without `uv pip install` (its folders, links
to the proven store files, and the bytes uv wrote: RECORD, INSTALLER, REQUESTED, direct_url.json, launchers,
`.data` scripts, headers and data), and the tree is the one uv makes of the same lock (`LOCKGEN_INSTALLER=uv`):
the same paths, bytes, modes and links, the same manifest bytes and digest. A store file whose proof no longer
stands is never linked by lockgen: uv installs, and the damage is refused and moved out as before."""

from __future__ import annotations

import json
import os
import re
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lockgen.adapters.pypi import wheel_links, wheel_store
from lockgen.adapters.store import env_manifest
from lockgen.adapters.store.env_manifest import MANIFEST
from lockgen.api import resolve as api
from lockgen.api.check import check_lock
from lockgen.api.materialize import materialize
from lockgen.api.steps import shared_steps
from lockgen.errors import LockFormatError
from lockgen.model.requests import Prefix
from tests.test_cli_startup import _loaded
from tests.test_pypi_offline import stack
from tests.wheel_index import Wheel, served_index

ENTRY_POINTS = "[console_scripts]\ntool = tool:main\n\n[gui_scripts]\ntoolw = tool:main\n"
WHEELS = [
    Wheel("alpha", "1.0"),
    Wheel(
        "tool",
        "1.0",
        requires=("alpha",),
        files={
            "tool/sub/deeper/leaf.py": "LEAF = 1\n",
            "tool-1.0.dist-info/entry_points.txt": ENTRY_POINTS,
            "tool-1.0.data/scripts/helper": "#!python\nprint('helped')\n",  # uv rewrites the line for the venv
            "tool-1.0.data/scripts/plain.sh": "#!/bin/sh\necho plain\n",
            "tool-1.0.data/data/share/tool/notes.txt": "notes\n",
            "tool-1.0.data/headers/tool.h": "int tool;\n",
        },
    ),
]
LINKED = "linked 2 wheels from lockgen's store as uv placed them"
BY_UV = "installed 2 wheels with uv"


@pytest.fixture
def lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("LOCKGEN_INSTALLER", raising=False)
    with served_index(tmp_path / "index", WHEELS) as url:
        path = stack(tmp_path, url, 'tool = "*"')
        path.write_text(path.read_text().replace('["linux-64", "linux-aarch64"]', '["linux-64"]'))
        api.resolve(path)
        yield tmp_path / "locks" / "cpu.conda-lock.yml"


def _tree(prefix: Path) -> dict[str, tuple[str, int, bytes]]:
    """Every entry under `prefix` but its stats (inodes and times): its kind, mode and bytes (a link's target)."""
    found = {}
    for root, folders, files in os.walk(prefix):
        for name in folders + files:
            path = Path(root) / name
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                kind, content = "link", os.readlink(path).encode()
            elif stat.S_ISREG(info.st_mode):
                kind, content = "file", path.read_bytes()
            else:
                kind, content = "folder", b""
            found[str(path.relative_to(prefix))] = (kind, stat.S_IMODE(info.st_mode), content)
    found.pop(".lockgen/stats.json")
    return found


def test_a_lock_placed_from_the_store_is_the_tree_uv_makes(
    lock: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    said: list[str] = []
    materialize(lock, None, tmp_path / "first", said.append)  # uv installs; lockgen proves and keeps what it placed
    assert any(line.startswith(BY_UV) for line in said), said
    said.clear()
    prefix = tmp_path / "env"
    _, digest = materialize(lock, None, prefix, said.append)
    assert any(line.startswith(LINKED) for line in said), said
    assert not any("with uv" in line for line in said), said
    ours, manifest = _tree(prefix), (prefix / MANIFEST).read_bytes()
    site = prefix / "lib/python3.11/site-packages"
    shared = (site / "tool/sub/deeper/leaf.py").stat()
    assert shared.st_ino == (tmp_path / "first/lib/python3.11/site-packages/tool/sub/deeper/leaf.py").stat().st_ino
    assert check_lock(lock, Prefix(prefix)).clean
    assert os.popen(f"{prefix / 'bin' / 'helper'}").read() == "helped\n"  # the launcher runs the prefix's interpreter
    os.rename(prefix, tmp_path / "placed")
    monkeypatch.setenv("LOCKGEN_INSTALLER", "uv")
    said.clear()
    _, uv_digest = materialize(lock, None, prefix, said.append)  # the oracle: uv's install, at the same prefix
    assert any(line.startswith(BY_UV) for line in said), said
    theirs = _tree(prefix)
    assert sorted(ours) == sorted(theirs)
    assert {path: entry for path, entry in ours.items() if entry != theirs[path]} == {}
    assert (prefix / MANIFEST).read_bytes() == manifest and uv_digest == digest
    for expected in ("bin/tool", "bin/toolw", "bin/helper", "bin/plain.sh", "share/tool/notes.txt", ".lock"):
        assert expected in ours, expected
    assert "include/site/python3.11/tool/tool.h" in ours
    for name in ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json"):
        assert ours[f"lib/python3.11/site-packages/tool-1.0.dist-info/{name}"][0] == "file", name
    assert not list(tmp_path.glob(".*placing*"))  # the folder the links were made in is gone


def test_the_proofs_are_renewed_by_the_links_lockgen_makes(lock: Path, tmp_path: Path) -> None:
    """The pass renews each proof with the lstat of the links it made (the link count and ctime they moved), so a
    store file edited in place later, its size and mtime put back and its link count as recorded, is found by its
    ctime, as after uv's install."""
    materialize(lock, None, tmp_path / "one", lambda _: None)
    said: list[str] = []
    two, _ = materialize(lock, None, tmp_path / "two", said.append)
    assert any(line.startswith(LINKED) for line in said), said
    linked = (two / "lib/python3.11/site-packages/alpha/__init__.py").stat()
    pin = next(path.stem for path in (tmp_path / "home/proven/wheels").glob("*.json") if _names(path, "alpha/"))
    proof = wheel_store.proof_of(pin)
    assert proof is not None
    at = proof.paths.index("alpha/__init__.py") * wheel_store.WIDTH
    assert proof.fingerprints[at : at + wheel_store.WIDTH] == [
        linked.st_dev,
        linked.st_ino,
        linked.st_size,
        linked.st_mtime_ns,
        linked.st_mode,
        linked.st_nlink,
        linked.st_ctime_ns,
    ]


def test_a_placed_materialize_starts_no_thread_pool(lock: Path, tmp_path: Path) -> None:
    """A lock placed by lockgen hashes only the few small files uv wrote: no thread pool is built for it (importing
    `concurrent.futures` and `logging` cost 3 ms of a placed loop's start)."""
    materialize(lock, None, tmp_path / "one", lambda _: None)
    code, loaded = _loaded(
        ("concurrent.futures",),
        "materialize",
        str(lock),
        "--prefix",
        str(tmp_path / "two"),
        env={"LOCKGEN_HOME": str(tmp_path / "home")},
    )
    assert (code, loaded) == (0, "loaded: []")
    assert list((tmp_path / "home" / "proven" / "placed").glob("*.entries"))  # kept by a placed environment alone


def _store_looks(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """The store files each `os.lstat` of the run looks at."""
    looked: list[str] = []
    real, store = os.lstat, str(tmp_path / "home" / "uv-cache") + "/"

    def spy(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        if str(path).startswith(store):
            looked.append(str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "lstat", spy)
    return looked


@pytest.mark.parametrize("loop", [True, False])
def test_in_a_loop_the_links_own_lstat_judges_each_store_file(
    lock: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loop: bool
) -> None:
    """Once the environment a proof was renewed with is removed (a create -> remove -> create loop), each store file is
    judged by its new link's lstat alone (one look at the first of each share); while that environment is there (its
    files at their recorded link count, whose ctime only a look before the link sees), each one before its link too."""
    import shutil

    materialize(lock, None, tmp_path / "one", lambda _: None)
    materialize(lock, None, tmp_path / "two", lambda _: None)  # placed: the proofs renewed at this link count
    if loop:
        shutil.rmtree(tmp_path / "two")
    looked = _store_looks(monkeypatch, tmp_path)
    said: list[str] = []
    materialize(lock, None, tmp_path / "three", said.append)
    assert any(line.startswith(LINKED) for line in said), said
    linked = sum(1 for path in (tmp_path / "three").rglob("*") if path.is_file() and path.stat().st_nlink > 1)
    assert linked > 4
    assert len(looked) <= 2 if loop else len(set(looked)) >= linked, (looked, linked)


def test_in_a_loop_a_store_file_at_its_recorded_link_count_with_its_ctime_moved_is_refused(
    lock: Path, tmp_path: Path
) -> None:
    """The ctime rule holds in a loop's state too: a store file edited in place with its size and mtime put back and its
    link count brought back to the recorded one is not taken by the pass (its link's lstat cannot show the ctime before
    the link); uv's path hashes it and refuses it."""
    import shutil

    materialize(lock, None, tmp_path / "one", lambda _: None)
    materialize(lock, None, tmp_path / "two", lambda _: None)  # placed: the proofs renewed at this link count
    shutil.rmtree(tmp_path / "two")
    stored = _stored(tmp_path)
    before, data = stored.stat(), stored.read_bytes()
    stored.chmod(0o644)
    stored.write_bytes(data.replace(b"1", b"2"))
    stored.chmod(stat.S_IMODE(before.st_mode))
    os.utime(stored, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.link(stored, tmp_path / "extra-link")  # its link count the one the proof recorded (`two`'s)
    said: list[str] = []
    with pytest.raises(LockFormatError) as refused:
        materialize(lock, None, tmp_path / "three", said.append)
    assert not any(line.startswith("linked") for line in said), said
    assert "differ from their wheel's RECORD" in refused.value.message and "leaf.py" in refused.value.message


def _worked_out(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The paths whose manifest entries each environment's record works out itself (`env_manifest.built`)."""
    worked: list[list[str]] = []
    real = env_manifest.built

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        made = real(*args, **kwargs)
        worked.append([entry["path"] for entry in made.manifest["files"]])
        return made

    monkeypatch.setattr(env_manifest, "built", spy)
    return worked


def test_the_record_takes_the_entries_the_last_placed_environment_kept(
    lock: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The manifest entries of a placement's files are kept by the first environment lockgen places from it, and the
    next one's record takes them whole, working out only the venv's own: the manifest is still uv's, byte for byte."""
    materialize(lock, None, tmp_path / "first", lambda _: None)  # uv's install
    kept_by: list[str] = []
    materialize(lock, None, tmp_path / "second", kept_by.append)  # placed: every entry worked out, then kept
    assert len(list((tmp_path / "home" / "proven" / "placed").glob("*.entries"))) == 1
    worked = _worked_out(monkeypatch)
    records = _records_read(monkeypatch)
    said: list[str] = []
    prefix = tmp_path / "env"
    _, digest = materialize(lock, None, prefix, said.append)
    assert any(line.startswith(LINKED) for line in said), said
    counts = re.search(r"(\d+) hashed, (\d+) proven", next(line for line in kept_by if line.startswith(LINKED)))
    stated = int(counts[1]) + int(counts[2]) if counts else -1
    assert any(
        line.startswith(LINKED) and line.endswith(f"first checked, kept with its entries: {stated} files)")
        for line in said
    ), said  # the line says the kept entries vouch, not that every RECORD was read now
    assert len(worked) == 1 and worked[0] and not [path for path in worked[0] if "site-packages/" in path], worked
    assert "bin/tool" not in worked[0] and "bin/activate" in worked[0]
    assert records == []  # the RECORDs' agreement was kept with the entries
    assert check_lock(lock, Prefix(prefix)).clean  # every file against its RECORD, read by the check
    manifest = (prefix / MANIFEST).read_bytes()
    os.rename(prefix, tmp_path / "placed")
    monkeypatch.setenv("LOCKGEN_INSTALLER", "uv")
    _, uv_digest = materialize(lock, None, prefix, lambda _: None)  # the oracle, at the same prefix
    assert (prefix / MANIFEST).read_bytes() == manifest and uv_digest == digest


def _records_read(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The wheels whose RECORD placements a build reads (`manifest_steps.placed_wheel`)."""
    read: list[str] = []
    real = shared_steps.placed_wheel

    def spy(package, *args, **kwargs):  # type: ignore[no-untyped-def]
        read.append(package.name)
        return real(package, *args, **kwargs)

    monkeypatch.setattr(shared_steps, "placed_wheel", spy)
    return read


def test_entries_are_kept_only_once_their_environment_passed_its_checks(
    lock: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The entries vouch for the placement's agreement with the RECORDs and for its unstated check: an environment
    refused after its placing keeps none (the next one reads the RECORDs and checks again, then keeps them)."""
    materialize(lock, None, tmp_path / "one", lambda _: None)
    real = shared_steps._nothing_unstated

    def refused(*args):  # type: ignore[no-untyped-def]
        raise LockFormatError("installing left 1 files no package states; first planted", "refuse it")

    monkeypatch.setattr(shared_steps, "_nothing_unstated", refused)
    with pytest.raises(LockFormatError):
        materialize(lock, None, tmp_path / "two", lambda _: None)
    assert not list((tmp_path / "home" / "proven" / "placed").glob("*.entries"))
    monkeypatch.setattr(shared_steps, "_nothing_unstated", real)
    records = _records_read(monkeypatch)
    said: list[str] = []
    materialize(lock, None, tmp_path / "three", said.append)
    assert any(line.startswith(LINKED) for line in said) and sorted(records) == ["alpha", "tool"], (said, records)
    assert list((tmp_path / "home" / "proven" / "placed").glob("*.entries"))


def test_entries_kept_under_other_proofs_or_changed_by_hand_are_not_taken(
    lock: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kept entries bound to other rules, placement or proofs (their header), out of order, cut short, changed
    (a line cut within, replaced by garbage or by another path's line: the header's sha256 of the rest), or naming a
    path the placement does not place (the venv's own, whose bytes name the prefix) are worked out again: the
    manifest is the same."""
    materialize(lock, None, tmp_path / "first", lambda _: None)
    _, digest = materialize(lock, None, tmp_path / "second", lambda _: None)
    kept = next((tmp_path / "home" / "proven" / "placed").glob("*.entries"))
    whole = kept.read_bytes()
    head, paths, body = whole.split(b"\n", 2)
    listed, lines = json.loads(paths), body.split(b"\n")
    damages = [
        json.dumps({**json.loads(head), "binding": "0" * 64}).encode() + b"\n" + paths + b"\n" + body,
        head + b"\n" + json.dumps(listed[::-1]).encode() + b"\n" + body,
        head + b"\n" + paths + b"\n" + body.rsplit(b"\n", 1)[0],
        head + b"\n" + json.dumps(sorted([*listed[1:], "bin/activate"])).encode() + b"\n" + body,
        b"not a header\n" + paths + b"\n" + body,
        whole[:-5],  # the last entry cut within: as many lines as paths
        head + b"\n" + paths + b"\n" + b"\n".join([*lines[:-1], b"garbage"]),
        head + b"\n" + paths + b"\n" + b"\n".join([*lines[:-1], lines[0]]),  # another path's entry
    ]
    worked = _worked_out(monkeypatch)
    for n, damage in enumerate(damages):
        kept.write_bytes(damage)
        said: list[str] = []
        prefix = tmp_path / "second"
        os.rename(prefix, tmp_path / f"moved-{n}")  # the same prefix: the same manifest
        _, again = materialize(lock, None, prefix, said.append)
        assert any(line.startswith(LINKED) for line in said), (n, said)
        assert again == digest and [path for path in worked[-1] if "site-packages/" in path], n
        json.loads((prefix / MANIFEST).read_bytes())  # a whole manifest


@pytest.mark.parametrize("suffix", ["entries", "json"])
def test_a_fifo_for_kept_entries_or_placement_is_not_waited_on(lock: Path, tmp_path: Path, suffix: str) -> None:
    """A FIFO where the entries or the placement are kept is refused as no file, not opened for a writer that never
    comes (bounded: a writer opens it after 20 s, so code that waits fails by its time instead of hanging)."""
    materialize(lock, None, tmp_path / "first", lambda _: None)
    _, digest = materialize(lock, None, tmp_path / "second", lambda _: None)
    kept = next((tmp_path / "home" / "proven" / "placed").glob(f"*.{suffix}"))
    kept.unlink()
    os.mkfifo(kept)
    release = threading.Timer(20, lambda: os.close(os.open(kept, os.O_WRONLY | os.O_NONBLOCK)))
    release.start()
    started = time.monotonic()
    try:
        _, again = materialize(lock, None, tmp_path / "second-again", lambda _: None)
    finally:
        release.cancel()
    assert time.monotonic() - started < 15
    assert again == digest


def test_a_folder_where_entries_are_written_aside_is_no_refusal(lock: Path, tmp_path: Path) -> None:
    """A folder at `<key>.pending` (where the entries are written aside) leaves them unkept, and every materialize
    still builds its environment."""
    materialize(lock, None, tmp_path / "first", lambda _: None)
    _, digest = materialize(lock, None, tmp_path / "second", lambda _: None)
    kept = next((tmp_path / "home" / "proven" / "placed").glob("*.entries"))
    kept.unlink()
    kept.with_suffix(".pending").mkdir()
    for n in range(2):
        said: list[str] = []
        _, again = materialize(lock, None, tmp_path / f"again-{n}", said.append)
        assert again == digest and any(line.startswith(LINKED) for line in said), said


def _names(record: Path, prefix: str) -> bool:
    return any(path.startswith(prefix) for path in json.loads(record.read_bytes())["paths"])


def _stored(tmp_path: Path) -> Path:
    return next((tmp_path / "home" / "uv-cache" / "archive-v0").glob("*/tool/sub/deeper/leaf.py"))


def _edited(stored: Path) -> bytes:
    """The store file edited in place: its size and mtime changed. Returns its bytes before."""
    data = stored.read_bytes()
    stored.chmod(0o644)
    stored.write_bytes(data + b"# more\n")
    stored.chmod(0o444)
    return data


def _replaced(stored: Path) -> bytes:
    """The store file replaced by another inode of the same size, mtime and mode, and other bytes."""
    before, data = stored.stat(), stored.read_bytes()
    other = stored.with_name("other")
    other.write_bytes(data.replace(b"1", b"2"))
    os.utime(other, ns=(before.st_atime_ns, before.st_mtime_ns))
    other.chmod(stat.S_IMODE(before.st_mode))
    os.replace(other, stored)
    return data


@pytest.mark.parametrize("damage", [_edited, _replaced])
def test_a_damaged_store_file_is_never_linked_by_lockgen(
    lock: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage
) -> None:
    materialize(lock, None, tmp_path / "one", lambda _: None)
    stored = _stored(tmp_path)
    damage(stored)
    damaged = stored.stat()
    sources: list[str] = []
    real = os.link

    def spy(source, target, *args, **kwargs):  # type: ignore[no-untyped-def]
        sources.append(str(source))
        return real(source, target, *args, **kwargs)

    monkeypatch.setattr(os, "link", spy)
    said: list[str] = []
    with pytest.raises(LockFormatError) as refused:
        materialize(lock, None, tmp_path / "two", said.append)
    assert str(stored) not in sources and not any(line.startswith("linked") for line in said), said
    assert any(line.startswith("installing 2 wheels with uv") for line in said), said  # uv's path found the damage
    assert "differ from their wheel's RECORD" in refused.value.message and "leaf.py" in refused.value.message
    if damage is _edited:  # a proven inode changed: moved out of the store, as uv's path does
        assert "moved out to" in refused.value.message and not stored.exists()
    else:  # an inode never proven: refused as uv's path refuses it (the wheel's RECORD may be what is wrong)
        assert "uv cache clean" in refused.value.hint and stored.exists()
    assert damaged.st_nlink == 1 + (damage is _edited)  # the store's (and `one`'s): nothing of `two` links it
    assert not (tmp_path / "two").exists() and not list(tmp_path.glob(".two*"))


def test_a_link_that_does_not_show_its_proven_file_undoes_the_pass(
    lock: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where a store file passes its check and is changed before it is linked (a race), the new link's lstat does
    not show the proven file: the pass is undone and uv installs (the check here forced to pass)."""
    materialize(lock, None, tmp_path / "one", lambda _: None)
    _edited(_stored(tmp_path))
    monkeypatch.setattr(wheel_store, "stands", lambda *_: True)
    said: list[str] = []
    with pytest.raises(LockFormatError):  # uv's path: hashed, refused
        materialize(lock, None, tmp_path / "two", said.append)
    assert not any(line.startswith("linked") for line in said), said
    assert not (tmp_path / "two").exists() and not list(tmp_path.glob(".two*"))


def test_verify_and_the_oracle_switch_take_uv(lock: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    materialize(lock, None, tmp_path / "first", lambda _: None)
    said: list[str] = []
    materialize(lock, None, tmp_path / "verified", said.append, verify=True)
    assert any(line.startswith(BY_UV) for line in said), said
    monkeypatch.setenv("LOCKGEN_INSTALLER", "uv")
    said.clear()
    materialize(lock, None, tmp_path / "forced", said.append)
    assert any(line.startswith(BY_UV) for line in said), said


def test_a_placement_changed_by_hand_places_nothing(lock: Path, tmp_path: Path) -> None:
    materialize(lock, None, tmp_path / "first", lambda _: None)
    records = sorted((tmp_path / "home" / "proven" / "placed").glob("*.json"))
    assert len(records) == 1
    kept = json.loads(records[0].read_bytes())
    damages = [
        lambda r: {**r, "folders": [*r["folders"], "../../escaped-folder"]},
        lambda r: {**r, "site": "../../escaped-site"},
        lambda r: {**r, "wheels": [[w, f, d, ["../../escaped-link"] * len(t)] for w, f, d, t in r["wheels"]]},
        lambda r: {**r, "wheels": [[w, "../..", d, t] for w, f, d, t in r["wheels"]]},
        lambda r: {**r, "wheels": [[w, f, "0" * 64, t] for w, f, d, t in r["wheels"]]},  # another proof's paths
        lambda r: {**r, "written": [["../escaped-written", mode, data] for _, mode, data in r["written"]]},
        lambda r: {**r, "written": [[path, str(mode), data] for path, mode, data in r["written"]]},
        lambda r: {**r, "written": [[path, mode, "\u0100"] for path, mode, data in r["written"]]},  # no byte
        lambda r: {**r, "venv": r["venv"].replace("3.11", "3.12")},  # made in another venv
        lambda r: {**r, "layout": 0},
        # a file its wheel's RECORD states without a sha256 (the RECORD itself) not placed
        lambda r: {
            **r,
            "written": [entry for entry in r["written"] if not entry[0].endswith("tool-1.0.dist-info/RECORD")],
        },
        lambda r: {
            **r,
            "written": [[path, 0o777 if path == "bin/tool" else mode, data] for path, mode, data in r["written"]],
        },
        lambda r: {
            **r,
            "written": [[path, 0o4755 if path == "bin/tool" else mode, data] for path, mode, data in r["written"]],
        },
    ]
    for n, damage in enumerate(damages):
        records[0].write_text(json.dumps(damage(kept)))
        said: list[str] = []
        materialize(lock, None, tmp_path / f"env-{n}", said.append)
        assert any(line.startswith(BY_UV) for line in said), (n, said)
    assert not list(tmp_path.rglob("escaped-*"))
    said.clear()
    materialize(lock, None, tmp_path / "after", said.append)  # uv's install kept its placement again
    assert any(line.startswith(LINKED) for line in said), said


def _dropped_after_its_links(self: wheel_links.Placing, prefix: Path) -> None:
    self.join()  # every link of the plan made beside the venv, then the pass given up


@pytest.mark.parametrize("drop", ["another venv", "after its links"])
def test_a_pass_dropped_leaves_every_store_file_its_proof(
    lock: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, drop: str
) -> None:
    """A placement that does not hold leaves uv to install on the proofs of before, re-reading no store file: a pass
    links nothing before the venv is made and is the placement's (links made and removed again would move each store
    file's ctime back at its recorded link count), and one dropped after its links trusts the files its own checks
    found standing right before each link. (Both re-read every file before: the venv was compared after the links.)"""
    materialize(lock, None, tmp_path / "one", lambda _: None)  # uv's install, its placement kept
    said: list[str] = []
    materialize(lock, None, tmp_path / "two", said.append)  # placed: the proofs renewed at this link count
    assert any(line.startswith(LINKED) for line in said), said
    if drop == "another venv":
        record = next((tmp_path / "home" / "proven" / "placed").glob("*.json"))
        kept = json.loads(record.read_bytes())
        record.write_text(json.dumps({**kept, "venv": kept["venv"] + "# another\n"}))
    else:
        monkeypatch.setattr(wheel_links.Placing, "finish", _dropped_after_its_links)
    said.clear()
    materialize(lock, None, tmp_path / "three", said.append)
    assert any(line.startswith(BY_UV) and "(every file against its RECORD: 0 hashed" in line for line in said), said


def test_a_uv_setting_given_in_the_environment_keys_another_placement(
    lock: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """uv given `UV_COMPILE_BYTECODE` writes byte code a placement kept without it would not: it is uv's install."""
    materialize(lock, None, tmp_path / "one", lambda _: None)
    monkeypatch.setenv("UV_COMPILE_BYTECODE", "1")
    said: list[str] = []
    materialize(lock, None, tmp_path / "two", said.append)
    assert any(line.startswith(BY_UV) for line in said), said
    assert list((tmp_path / "two").rglob("*.pyc"))


def test_a_placement_is_kept_per_python() -> None:
    """The same pure wheels under two Pythons keep two placements (one would take the other's place on every run)."""
    wheels = [("ab" * 32, "https://example.org/alpha-1.0-py3-none-any.whl")]
    assert wheel_links.key(wheels, "3.11") != wheel_links.key(wheels, "3.12")
    assert wheel_links.key(wheels, "3.11") == wheel_links.key(wheels, "3.11")
