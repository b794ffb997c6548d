"""The stat walk that keys a kept verdict (`stat_walk.tree_fingerprint`): its digest is the tree's alone, the same
walked by one process or shared among forked children on any number of cores, kept walk or not, and any change
of a path anywhere in the tree (deep in a shared subtree or in the top levels walked first) gives another."""

from __future__ import annotations

import os
import time
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lockgen.adapters import parallel
from lockgen.adapters.proof import stat_walk

NAMES = st.text(alphabet="abc\n\x01 é", min_size=1, max_size=3)
TREES = st.recursive(st.binary(max_size=4), lambda inner: st.dictionaries(NAMES, inner, max_size=4), max_leaves=30)


def _plant(folder: Path, tree: dict | bytes) -> None:
    for name, node in tree.items() if isinstance(tree, dict) else ():
        if isinstance(node, dict):
            (folder / name).mkdir()
            _plant(folder / name, node)
        else:
            (folder / name).write_bytes(node)


def _wide_and_deep(root: Path) -> Path:
    """More folders than the frontier at the second level, each with a subtree of its own, and files on top."""
    for index in range(stat_walk.FRONTIER + 9):
        deep = root / f"pkg{index:03d}" / "sub" / "deeper"
        deep.mkdir(parents=True)
        (deep / "file.txt").write_text(str(index))
        (root / f"pkg{index:03d}" / "top.txt").write_text("x")
    for index in range(12):  # a folder of many folders: opened before the sharing (`BIG_FOLDER`)
        (root / "pkg005" / f"many{index:02d}").mkdir()
        (root / "pkg005" / f"many{index:02d}" / "x.txt").write_text(str(index))
    (root / "lone.txt").write_text("top")
    (root / "empty").mkdir()
    os.symlink("pkg000", root / "link-to-folder")
    return root


def _digests(root: Path, monkeypatch: pytest.MonkeyPatch) -> set[str]:
    seen = set()
    for cores in (1, 2, 5):
        monkeypatch.setattr(parallel, "cores", lambda cores=cores: cores)
        seen |= {stat_walk.tree_fingerprint(root).digest, stat_walk.tree_fingerprint(root, keep_walk=True).digest}
    return seen


def test_the_digest_is_the_trees_on_any_number_of_cores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _wide_and_deep(tmp_path / "tree")
    assert len(_digests(root, monkeypatch)) == 1
    walked = stat_walk.tree_fingerprint(root, keep_walk=True)
    assert (
        walked.paths
        == stat_walk.tree_fingerprint(root).paths
        == sum(len(dirs) + len(files) for _, dirs, files in os.walk(root))
    )
    assert (
        walked.walked is not None
        and "pkg007/sub/deeper/file.txt" in walked.walked
        and "pkg007/sub" not in walked.walked
    )


def test_a_kept_walk_shared_among_children_is_every_paths_lstat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first check keeps the walk for its work: walked by forked children (who send their part back) or here
    alone, it holds every path but the folders, each with its own lstat's fields."""
    root = _wide_and_deep(tmp_path / "tree")
    (root / "pkg003" / "sub" / "caf\udce9.txt").write_bytes(b"a name that is not UTF-8")
    expected = {}
    for folder, dirs, files in os.walk(root):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
            info = os.lstat(os.path.join(folder, name))
            relative = os.path.relpath(os.path.join(folder, name), root)
            expected[relative] = (
                info.st_dev,
                info.st_ino,
                info.st_size,
                info.st_mtime_ns,
                info.st_ctime_ns,
                info.st_mode,
                info.st_nlink,
            )
    forks = []
    real_fork = os.fork
    monkeypatch.setattr(os, "fork", lambda: forks.append(1) or real_fork())
    for cores in (1, 3):
        monkeypatch.setattr(parallel, "cores", lambda cores=cores: cores)
        walked = stat_walk.tree_fingerprint(root, keep_walk=True).walked
        assert walked is not None and {path: tuple(info) for path, info in walked.items()} == expected
    assert forks, "with three cores the walk is shared"


def test_where_no_child_can_be_forked_the_caller_walks_it_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A running thread forbids forking (`parallel.Forked`): the caller takes every share from the pipe itself."""
    root = _wide_and_deep(tmp_path / "tree")
    monkeypatch.setattr(parallel, "cores", lambda: 4)
    shared = stat_walk.tree_fingerprint(root)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert stat_walk.tree_fingerprint(root) == shared
    finally:
        stop.set()
        other.join()


@pytest.mark.parametrize(
    "change",
    ["edit deep", "edit top", "new deep", "new top", "remove empty", "rename folder", "chmod deep", "relink"],
)
def test_any_change_anywhere_gives_another_digest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str) -> None:
    root = _wide_and_deep(tmp_path / "tree")
    monkeypatch.setattr(parallel, "cores", lambda: 3)
    before = stat_walk.tree_fingerprint(root).digest
    deep = root / "pkg070" / "sub" / "deeper" / "file.txt"
    {
        "edit deep": lambda: deep.write_text("70"),  # same bytes: only ctime and mtime tell
        "edit top": lambda: (root / "lone.txt").write_text("top"),
        "new deep": lambda: (deep.parent / "new.txt").write_text(""),
        "new top": lambda: (root / "new.txt").write_text(""),
        "remove empty": lambda: (root / "empty").rmdir(),
        "rename folder": lambda: (root / "pkg070" / "sub").rename(root / "pkg070" / "bus"),
        "chmod deep": lambda: deep.chmod(0o600),
        "relink": lambda: (os.unlink(root / "link-to-folder"), os.symlink("lone.txt", root / "link-to-folder")),
    }[change]()
    assert len(_digests(root, monkeypatch) | {before}) == 2


def test_a_link_made_or_removed_elsewhere_is_no_change_and_an_edit_putting_size_and_mtime_back_is_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another environment linking a file of the tree (made, then removed) moves the file's ctime and link count: the
    digest stays and `links_moved` counts the file, which a kept verdict then stands for (issue 43). An edit with the
    size and mtime put back moves the ctime with the link count as it was: the walk is another (git's rule), and so is
    a link made and removed again since the kept walk (the stat data cannot tell it from that edit), and a link made of
    a file that was not shared at the kept walk (an edit then a link would pass otherwise). Before, the ctime was in
    the digest, so the link alone gave another digest."""
    root = _wide_and_deep(tmp_path / "tree")
    monkeypatch.setattr(parallel, "cores", lambda: 3)
    deep = root / "pkg070" / "sub" / "deeper" / "file.txt"
    os.link(deep, tmp_path / "store-copy")  # shared, as a store file is, before the kept walk
    alone = next(path for path in root.rglob("*") if path.is_file() and path != deep)  # a link count of 1
    kept = stat_walk.tree_fingerprint(root)
    tick = 0.05  # past the coarse clock a file system stamps ctime from
    time.sleep(tick)
    os.link(deep, tmp_path / "elsewhere")
    linked = stat_walk.tree_fingerprint(root)
    assert linked.digest == kept.digest and stat_walk.links_moved(kept.stamps, linked.stamps) == 1
    time.sleep(tick)
    os.unlink(tmp_path / "elsewhere")
    removed = stat_walk.tree_fingerprint(root)
    assert (
        removed.digest == kept.digest and stat_walk.links_moved(linked.stamps, removed.stamps) == 1
    )  # after a look that kept the new count
    assert (
        stat_walk.links_moved(kept.stamps, removed.stamps) is None
    )  # the count back to the kept one, the ctime moved: read again
    os.link(
        alone, tmp_path / "alone-elsewhere"
    )  # a file no other place linked at the look: its ctime moved with its count
    assert (
        stat_walk.links_moved(removed.stamps, stat_walk.tree_fingerprint(root).stamps) is None
    )  # a link made after an edit would hide it
    os.unlink(tmp_path / "alone-elsewhere")
    removed = stat_walk.tree_fingerprint(root)
    before = deep.stat()
    time.sleep(tick)
    deep.write_bytes(bytes(byte ^ 1 for byte in deep.read_bytes()))  # the same size
    os.utime(deep, ns=(before.st_atime_ns, before.st_mtime_ns))
    edited = stat_walk.tree_fingerprint(root)
    assert edited.digest == kept.digest and stat_walk.links_moved(removed.stamps, edited.stamps) is None
    assert stat_walk.links_moved({**removed.stamps, "": "not numbers"}, edited.stamps) is None  # a damaged record
    assert stat_walk.links_moved({}, edited.stamps) is None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tree=TREES)
def test_small_trees_split_early_read_the_same(
    tree: dict | bytes, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a frontier of two folders, trees of a few paths are split, opened and shared too: one digest each way."""
    root = tmp_path_factory.mktemp("tree")
    _plant(root, tree)
    monkeypatch.setattr(stat_walk, "FRONTIER", 2)
    monkeypatch.setattr(stat_walk, "BIG_FOLDER", 3)
    assert len(_digests(root, monkeypatch)) == 1


def test_where_forking_fails_the_caller_walks_it_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fork refused (a cgroup's pids limit) is no error: the shares the children would take are the caller's."""
    root = _wide_and_deep(tmp_path / "tree")
    monkeypatch.setattr(parallel, "cores", lambda: 4)
    shared = stat_walk.tree_fingerprint(root)

    def refused() -> int:
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", refused)
    assert stat_walk.tree_fingerprint(root) == shared
    assert parallel.Forked(lambda: "never").result() is None


def test_where_no_pipe_can_be_made_the_caller_walks_it_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _wide_and_deep(tmp_path / "tree")
    monkeypatch.setattr(parallel, "cores", lambda: 4)
    shared = stat_walk.tree_fingerprint(root)

    def refused() -> tuple[int, int]:
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(os, "pipe", refused)
    assert stat_walk.tree_fingerprint(root) == shared
    assert parallel.Forked(lambda: "never").result() is None


@given(st.binary(max_size=4096), st.integers(min_value=1, max_value=7))
def test_the_kept_run_s_sha256_is_hashlib_s(data: bytes, pieces: int) -> None:
    """`stat_digest.sha256` (the interpreter's own SHA-256, so the kept `run` loads no OpenSSL) gives hashlib's
    digests, whole or fed in pieces: the kept records' keys and the walks' digests are those of before."""
    import hashlib

    from lockgen.adapters.proof.stat_digest import sha256

    digest = sha256()
    for at in range(pieces):
        digest.update(data[at * len(data) // pieces : (at + 1) * len(data) // pieces])
    assert digest.hexdigest() == sha256(data).hexdigest() == hashlib.sha256(data).hexdigest()
