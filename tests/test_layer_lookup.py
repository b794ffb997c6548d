"""`core.image.layer_lookup` against a model of the layers applied bottom up, as a runtime that extracts them in order
(containers/storage's vfs driver) makes the file system: whiteouts remove what the layers below put there, a
member replaces what lies at its path (a folder over a folder merges), and a path is then walked from the
root, each link followed as it is met. Any layers (folders, files, links absolute and relative, whiteouts,
opaque folders) give the same answer both ways."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from lockgen.core.image.layer_lookup import MAX_LINKS, file_at
from lockgen.model.image import LayerEntry

NAMES = ("a", "b")
PATHS = st.lists(st.sampled_from(NAMES), min_size=1, max_size=3).map("/".join)
TARGETS = st.builds(lambda absolute, path: ("/" if absolute else "") + path, st.booleans(), PATHS)
KIND = st.one_of(
    st.just("folder"), st.just("file"), st.just("whiteout"), st.just("opaque"), TARGETS.map(lambda t: "->" + t)
)


def _layer(members: dict[str, str]) -> dict[str, LayerEntry]:
    """A well-formed layer's tar members: each member's folders present as folders (as tar writers put them),
    members under a non-folder of the same layer dropped."""
    entries: dict[str, LayerEntry] = {}
    for path, kind in sorted(members.items(), key=lambda item: item[0].count("/")):
        parents = ["/".join(path.split("/")[:i]) for i in range(1, path.count("/") + 1)]
        if any(p in entries and not entries[p].folder for p in parents):
            continue
        for parent in parents:
            entries.setdefault(parent, LayerEntry(parent, True))
        folder, _, name = path.rpartition("/")
        if kind == "whiteout":
            entries[f"{folder}/.wh.{name}".lstrip("/")] = LayerEntry(f"{folder}/.wh.{name}".lstrip("/"), False)
        elif kind == "opaque":
            entries[path] = LayerEntry(path, True)
            entries[f"{path}/.wh..wh..opq"] = LayerEntry(f"{path}/.wh..wh..opq", False)
        else:
            entries[path] = LayerEntry(path, kind == "folder", kind[2:] if kind.startswith("->") else None)
    return entries


def _apply(layers: list[dict[str, LayerEntry]]) -> dict[str, LayerEntry]:
    tree: dict[str, LayerEntry] = {}
    for layer in layers:
        below = dict(tree)
        for entry in layer.values():
            folder, _, name = entry.path.rpartition("/")
            if name == ".wh..wh..opq":
                gone = [p for p in below if p.startswith(folder + "/")]
            elif name.startswith(".wh."):
                target = f"{folder}/{name[4:]}".lstrip("/")
                gone = [p for p in below if p == target or p.startswith(target + "/")]
            else:
                continue
            for path in gone:
                tree.pop(path, None)
        for entry in sorted(layer.values(), key=lambda e: e.path.count("/")):
            if entry.path.rpartition("/")[2].startswith(".wh."):
                continue
            old = tree.get(entry.path)
            if old is not None and not (old.folder and entry.folder):
                for path in [p for p in tree if p == entry.path or p.startswith(entry.path + "/")]:
                    del tree[path]
            tree[entry.path] = entry
    return tree


def _walk(tree: dict[str, LayerEntry], path: str) -> str | None:
    """The file `path` names in the applied tree, each link followed as the walk meets it."""
    pending, done, links = [p for p in path.split("/") if p], [], 0
    while pending:
        part = pending.pop(0)
        if part == "..":
            done = done[:-1]
            continue
        entry = tree.get("/".join([*done, part]))
        if entry is None or (pending and not entry.folder and entry.link is None):
            return None
        if entry.link is not None:
            links += 1
            if links > MAX_LINKS:
                return None
            pending = [p for p in entry.link.split("/") if p not in ("", ".")] + pending
            done = [] if entry.link.startswith("/") else done
            continue
        done.append(part)
    found = tree.get("/".join(done))
    return "/".join(done) if done and found is not None and not found.folder and found.link is None else None


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.dictionaries(PATHS, KIND, max_size=5), min_size=1, max_size=4), st.data())
def test_a_path_is_the_file_the_applied_layers_give(layers: list[dict[str, str]], data: st.DataObject) -> None:
    built = [_layer(members) for members in layers]
    path = data.draw(st.sampled_from(sorted({p for members in layers for p in members}) or ["a"]) | PATHS)
    assert file_at("/" + path, built.__getitem__, len(built)) == _walk(_apply(built), path)


def test_only_the_layers_a_decision_needs_are_read() -> None:
    built = [
        _layer({"usr/bin/python3.11": "file"}),
        _layer({"usr/local/bin/python3.11": "file"}),
        _layer({"etc/x": "file"}),
    ]
    read: list[int] = []

    def layer(index: int) -> dict[str, LayerEntry]:
        read.append(index)
        return built[index]

    assert file_at("/usr/local/bin/python3.11", layer, 3) == "usr/local/bin/python3.11" and read == [2, 1]
    built.append(_layer({"usr/local/bin/python3.11": "whiteout"}))
    assert file_at("/usr/local/bin/python3.11", built.__getitem__, 4) is None
    built.append(_layer({"usr/local/bin/python3.11": "->../../bin/python3.11"}))
    assert file_at("/usr/local/bin/python3.11", built.__getitem__, 5) == "usr/bin/python3.11"
    # a folder over a lower layer's link (or file) at its path hides it, and what it led to
    over = [_layer({"opt/python3.11": "file", "bin": "->opt"}), _layer({"bin/other": "file"})]
    assert file_at("/bin/python3.11", over.__getitem__, 2) is None
    assert (
        _walk(_apply(over), "bin/python3.11") is None
        and file_at("/bin/python3.11", over.__getitem__, 1) == "opt/python3.11"
    )
