"""uv.lock's walk (`adapters.foreign.uv_lock`, `uv_graph`) taken once for both Linux platforms where it cannot differ
between them: no marker it judged names a variable the platforms differ in (`platform_machine`). Where one does, on
an edge or in a fork's resolution markers, each platform is walked on its own and reaches its own packages; where
none does, the second platform reaches what a walk of its own would (the first walk counted, the result compared with
the one a walk per platform gives)."""

from __future__ import annotations

import gc
import json
import tomllib
import tracemalloc
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from lockgen.adapters.foreign import uv_graph, uv_lock
from lockgen.adapters.pypi.python_wheels import environment_of, python_within
from lockgen.errors import UserError
from lockgen.adapters.foreign.uv_lock import UvChoices, WalkedParts, read_uv_lock
from lockgen.adapters.foreign.uv_lock_toml import read_uv_toml

_HEAD = 'version = 1\nrevision = 2\nrequires-python = ">=3.10"\n'
_APP = '\n[[package]]\nname = "app"\nversion = "0.1.0"\nsource = {{ virtual = "." }}\ndependencies = [\n{edges}]\n'


def _package(name: str, version: str = "1.0", resolution: str = "") -> str:
    wheels = "".join(
        f'    {{ url = "https://files.example/{name}-{version}-py3-none-manylinux_2_17_{machine}.whl", '
        f'hash = "sha256:{"ab" * 32}" }},\n'
        for machine in ("x86_64", "aarch64")
    )
    return (
        f'\n[[package]]\nname = "{name}"\nversion = "{version}"\nsource = {{ registry = "https://pypi.org/simple" }}\n'
        + (f"resolution-markers = [{resolution}]\n" if resolution else "")
        + f"wheels = [\n{wheels}]\n"
    )


def _lock(edges: list[str], *packages: str) -> dict[str, Any]:
    return tomllib.loads(_HEAD + _APP.format(edges="".join(f"    {edge},\n" for edge in edges)) + "".join(packages))


def _walked_per_platform(data: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> tuple[int, set[tuple[str, str]]]:
    """How many walks the import took, and the (platform, package) pairs it pinned."""
    walks: list[str] = []
    installed = uv_lock.installed

    def counted(*args: Any, **kwargs: Any) -> Any:
        walks.append("walk")
        return installed(*args, **kwargs)

    monkeypatch.setattr(uv_lock, "installed", counted)
    found = read_uv_lock(data, UvChoices(python="3.12"))
    return len(walks), {(pin.platform, pin.name) for pin in found.pins}


def test_a_lock_no_marker_of_which_names_the_machine_is_walked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    linux, old_python = "sys_platform == 'linux'", "python_version < '3.11'"
    data = _lock(
        [f'{{ name = "a", marker = "{linux}" }}', f'{{ name = "b", marker = "{old_python}" }}'],
        _package("a"),
        _package("b"),
    )
    walks, pinned = _walked_per_platform(data, monkeypatch)
    assert walks == 1
    assert pinned == {("linux-64", "a"), ("linux-aarch64", "a")}


@pytest.mark.parametrize("variable", ["platform_machine", "platform.machine"])  # the older spelling read alike
def test_an_edge_naming_the_machine_is_walked_on_each_platform(monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    on_x86 = f"{variable} == 'x86_64'"
    data = _lock(['{ name = "a" }', f'{{ name = "b", marker = "{on_x86}" }}'], _package("a"), _package("b"))
    walks, pinned = _walked_per_platform(data, monkeypatch)
    assert walks == 2
    assert pinned == {("linux-64", "a"), ("linux-64", "b"), ("linux-aarch64", "a")}


def test_a_fork_chosen_by_the_machine_is_walked_on_each_platform(monkeypatch: pytest.MonkeyPatch) -> None:
    """The edge names no variable; the forks' resolution markers do: each platform takes its own fork."""
    data = _lock(
        ['{ name = "a" }'],
        _package("a", "1.0", "\"platform_machine == 'x86_64'\""),
        _package("a", "2.0", "\"platform_machine != 'x86_64'\""),
    )
    walks, _ = _walked_per_platform(data, monkeypatch)
    found = read_uv_lock(data, UvChoices(python="3.12"))
    assert walks == 2
    assert {(pin.platform, pin.version) for pin in found.pins} == {("linux-64", "1.0"), ("linux-aarch64", "2.0")}


def test_a_large_lock_is_read_and_walked_in_bounded_memory() -> None:
    """What the import holds of a uv.lock per package, traced: its kept parts (each wheel two slots, not a table),
    then the walk's own on top (an edge's items a tuple, not a frozenset; one walk for both platforms; a package's
    own node expanded by its entry's id; the per-edge caches let go before the entries are made). On the benchmark's
    lock of 1,000 packages, 3,222 bytes a package before (1,779 kept, the walk 1,443 more at its peak), 2,394 since
    (1,508 and 886), 2,245 with a package's wheels kept as one string (1,220 and 1,025: the pins now hold URLs of
    their own, which were the document's), 2,161 with the graph's names and an edge's extras the strings the
    document holds (not copies) and a name's entries a tuple (1,220 and 942), 1,957 with each package's wheels let go
    of once pinned, as the import gives its document away (1,220 and 737; 1,164 and 737 at 8d2e3a8), 1,806
    with each edge kept as five slots, not a table (1,044 and 762), 1,528 with what the walk works out of an edge
    held on it and each package kept as ten slots (936 and 592). Once converted, a package given away lets go of
    its edges too, not only its wheels: the document and the pins after the conversion, 1,443 bytes a package
    before, 1,233 since; 1,337 with the nodes a walk expanded marked on the packages, not kept in a set (953 and
    383: the walk was 563), 1,339 with each wheel's sha256 kept as its 32 bytes (866 and 473: the conversion's end
    now the peak, the pins' hashes theirs), 1,353 with each package's table of extras kept as a key tuple and a
    value tuple (821 and 532; at 30k packages the import's peak, the walk's, fell 44 bytes a package), 1,303 with
    what the walk works out of an edge in three slots of it, not a tuple (838 and 466)."""
    from benchmarks.bench_uv_lock_import import uv_lock_text

    packages = 1000
    text = uv_lock_text(packages)
    read_uv_lock(read_uv_toml(text, WalkedParts()), UvChoices(python="3.12"))  # the caches every import fills
    gc.collect()
    tracemalloc.start()
    try:
        document = read_uv_toml(text, WalkedParts())
        kept = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        found = read_uv_lock(document, UvChoices(python="3.12"), given_away=True)
        walk = tracemalloc.get_traced_memory()[1] - kept
        after = tracemalloc.get_traced_memory()[0]  # the document given away and the pins, both still held
    finally:
        tracemalloc.stop()
    assert len(found.pins) == 2 * packages
    assert kept / packages < 850 and walk / packages < 560, (kept / packages, walk / packages)
    assert (kept + walk) / packages < 1330, (kept + walk) / packages  # the peak: 1,353 with a tuple per edge
    assert after / packages < 1300, after / packages  # 1,443 while a converted package kept its edges


_WHEEL_VALUES = st.one_of(
    st.text(alphabet="ab\n:/é", max_size=6),
    st.from_regex(r"sha256:[0-9a-fA-F]{63,65}", fullmatch=True),  # as uv writes a hash, and near it
    st.integers(),
    st.none(),
)
_WHEEL_TABLES = st.dictionaries(st.sampled_from(["url", "hash", "size"]), _WHEEL_VALUES, max_size=3)


@given(st.lists(st.one_of(_WHEEL_TABLES, st.text(max_size=3), st.integers()), max_size=4))
@example([{"url": "https://x/a.whl", "hash": "sha256:" + "ab" * 32}, {"url": "u", "hash": "sha256:" + "0" * 64}])
def test_a_package_s_wheels_are_kept_as_their_tables_read(wheels: list[Any]) -> None:
    """However a package's wheels are kept (one string where each is a table of a `url` and a `hash` without a line
    end, bytes where each URL is ASCII and each hash a sha256 as uv writes it, else each table's two slots), the
    walk reads each wheel's `url` and `hash` as its table has them, in order, and any other value as it is."""
    kept = WalkedParts()({"name": "a", "wheels": wheels})["wheels"]
    expected = [{k: w[k] for k in ("url", "hash") if k in w} if isinstance(w, dict) else w for w in wheels]
    assert [dict(w) if isinstance(w, Mapping) else w for w in kept] == expected
    assert len(kept) == len(wheels)
    assert [dict(kept[i]) if isinstance(kept[i], Mapping) else kept[i] for i in range(len(wheels))] == expected
    for wheel, table in zip(kept, expected):  # `in` and `get` as the table answers them (the conversion asks them)
        if isinstance(wheel, Mapping):
            assert all((key in wheel) == (key in table) for key in ("url", "hash", "size", 0))
            assert all(wheel.get(key, "-") == table.get(key, "-") for key in ("url", "hash", "size"))


_EDGE_VALUES = st.one_of(st.sampled_from(["a", "fast", " sys_platform == 'linux'"]), st.integers(), st.lists(st.text()))
_EDGE_TABLES = st.dictionaries(st.sampled_from(["name", "extra", "marker", "version", "source", "other"]), _EDGE_VALUES)


@given(_EDGE_TABLES)
def test_an_edge_is_kept_as_its_table_read(table: dict[str, Any]) -> None:
    """An edge of a package's dependencies, extras or groups is kept as five slots (`KeptEdge`: a table of three
    keys was 184 bytes, 72 so) that answer `[]`, `in` and `get` for the keys the walk reads as the table does; a key
    no reader reads is not kept."""
    lists = {"dependencies": [table], "optional-dependencies": {"x": [table]}, "dev-dependencies": {"d": [table]}}
    kept = WalkedParts()({"name": "a", **lists})
    edges = [kept["dependencies"][0], kept["optional-dependencies"]["x"][0], kept["dev-dependencies"]["d"][0]]
    assert edges[0] is edges[1] is edges[2]  # held once
    walked = {key: value for key, value in table.items() if key != "other"}
    assert isinstance(edges[0], Mapping) and dict(edges[0]) == walked and len(edges[0]) == len(walked)
    for key in ("name", "extra", "marker", "version", "source", "other", 0):
        assert (key in edges[0]) == (key in walked)
        assert edges[0].get(key, "-") == walked.get(key, "-")  # type: ignore[call-overload]
        if key in walked:
            assert edges[0][key] == walked[key]
        else:
            with pytest.raises(KeyError):
                edges[0][key]


_PARTS = st.recursive(
    st.one_of(st.sampled_from(["a", "b", "fast"]), st.booleans(), st.integers(-3, 3), st.integers(10**6, 10**6 + 2)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["name", "extra", "marker"]), inner, max_size=3)
    ),
    max_leaves=12,
)


@given(st.lists(_PARTS, min_size=1, max_size=6))
def test_the_parts_kept_are_the_tables_read_and_equal_ones_are_held_once(values: list[Any]) -> None:
    """What `WalkedParts` keeps of a table's walked keys is the value read, type for type (True is not 1), and two
    equal lists or tables of strings are one object (held once: a lock repeats its edges under its extras); an edge
    (a table in the list) is kept as a `KeptEdge`, read as the table is."""
    reduce = WalkedParts()
    kept = [reduce({"name": "a", "dependencies": value})["dependencies"] for value in values]
    assert [json.dumps(value, sort_keys=True, default=dict) for value in kept] == [
        json.dumps(value, sort_keys=True) for value in values
    ]

    def of_strings(value: Any) -> bool:
        if isinstance(value, list):
            return all(of_strings(item) for item in value)
        if isinstance(value, dict):
            return all(of_strings(item) for item in value.values())
        return isinstance(value, str)

    for first, first_kept in zip(values, kept):
        for second, second_kept in zip(values, kept):
            if isinstance(first, (list, dict)) and of_strings(first) and json.dumps(first) == json.dumps(second):
                assert first_kept is second_kept


def test_a_fork_marker_never_judged_is_passed_over_as_before() -> None:
    """The markers a fork's choice judges are kept for the platforms' comparison: an item of `resolution-markers`
    that is no string, after one that holds, was never judged and is not read now either (it ended the import with
    an AttributeError when it was kept)."""
    data = _lock(
        ['{ name = "a" }'],
        _package("a", "1.0", "\"python_version >= '3.10'\", 5"),
        _package("a", "2.0", "\"python_version < '3.10'\""),
    )
    found = read_uv_lock(data, UvChoices(python="3.12"))
    assert {(pin.platform, pin.version) for pin in found.pins} == {("linux-64", "1.0"), ("linux-aarch64", "1.0")}


def test_the_entries_are_made_as_the_pins_are_let_go_of() -> None:
    """Each pin is let go of as its entry is made, in the pins' order: at 300k packages the 600k pins (72 bytes each)
    were held beside their entries, the import's peak once the walk's was lowered."""
    count = 20_000
    tracemalloc.start()
    try:
        pins = [
            uv_lock.PinnedWheel("linux-64", f"p{i}", "1.0", f"https://x/p{i}-1.0-py3-none-any.whl", f"{i:064x}")
            for i in range(count)
        ]
        expected = [(pin.name, pin.url, pin.sha256) for pin in pins]
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        entries = uv_lock.entries_of(pins)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [(entry.name, entry.url, entry.hash.sha256) for entry in entries] == expected and not pins
    assert (peak - before) / count < 200, (peak - before) / count  # the entries less the pins (232 while held)


def _counted_walks(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """The walks `uv_graph._traverse` takes from now on, each told by whether it grew the active items."""
    walks: list[bool] = []
    traverse = uv_graph._traverse

    def counted(*args: Any, **kwargs: Any) -> Any:
        walks.append(kwargs["grow"])
        return traverse(*args, **kwargs)

    monkeypatch.setattr(uv_graph, "_traverse", counted)
    return walks


def test_the_install_walk_is_the_activation_s_last_where_it_would_walk_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    """The benchmark's lock (every edge under a marker, half naming an extra that stays off) is walked once: the
    activation's walk chose no fork and each of its verdicts is the one the whole active set gives, so the install
    walk would take the same edges in the same order (two walks before: a sixth of the walk and conversion)."""
    from benchmarks.bench_uv_lock_import import uv_lock_text

    data = read_uv_toml(uv_lock_text(50), WalkedParts())
    walks = _counted_walks(monkeypatch)
    found = read_uv_lock(data, UvChoices(python="3.12"))
    assert walks == [True]
    assert len(found.pins) == 100


def test_an_edge_judged_before_the_item_its_marker_names_was_activated_is_walked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`a`'s edge is judged while `b[x]` is not yet active (it holds), then `b[x]` is activated: under the whole
    active set it does not hold, so the install walk is taken and `a` is not installed."""
    data = _lock(
        ['{ name = "a", marker = "extra != \'extra-1-b-x\'" }', '{ name = "b", extra = ["x"] }'],
        _package("a"),
        _package("b") + "\n[package.optional-dependencies]\nx = []\n",
    )
    walks = _counted_walks(monkeypatch)
    found = read_uv_lock(data, UvChoices(python="3.12"))
    assert walks == [True, False]
    assert {pin.name for pin in found.pins} == {"b"}


_NAMES = ("a", "b", "c", "d")
_MARKERS = st.sampled_from(
    ["", "sys_platform == 'linux'", "sys_platform == 'win32'"]
    + [f"extra {test} 'extra-1-{name}-x'" for name in _NAMES for test in ("==", "!=")]
    + ["extra == 'extra-1-a-x' and extra != 'extra-1-c-x'", "extra != 'extra-1-b-x' or python_version < '3.0'"]
)
_EDGES = st.lists(
    st.tuples(st.sampled_from(_NAMES), st.booleans(), _MARKERS).map(
        lambda edge: (
            "{ name = "
            + json.dumps(edge[0])
            + (', extra = ["x"]' if edge[1] else "")
            + (f", marker = {json.dumps(edge[2])}" if edge[2] else "")
            + " }"
        )
    ),
    max_size=3,
)


@given(_EDGES, st.lists(st.tuples(_EDGES, _EDGES), min_size=4, max_size=4), st.booleans())
def test_the_install_walk_reaches_what_a_walk_of_its_own_reaches(
    root: list[str], packages: list[tuple[list[str], list[str]]], forked: bool
) -> None:
    """However the activation's last walk judged its edges (an extra activated after an edge naming it was judged,
    before or after, `==` and `!=`, forks), `installed` given the activation reaches what it reaches given the
    active items alone, in the same order, or refuses alike."""
    texts = []
    for name, (dependencies, extra) in zip(_NAMES, packages):
        text = _package(name).replace("wheels = [", f"dependencies = [{', '.join(dependencies)}]\nwheels = [")
        texts.append(text + f"\n[package.optional-dependencies]\nx = [{', '.join(extra)}]\n")
    if forked:
        texts.append(_package("d", "2.0", "\"python_version < '3.0'\""))
    graph = uv_graph.UvGraph.of(_lock(root, *texts))
    starts: list[uv_graph.Node] = [(graph.member("app"), "", "")]
    environment = environment_of("linux-64", python_within(">=3.10", "3.12"))
    outcomes = []
    for given_activation in (True, False):
        activation = uv_graph.activation(graph, starts, environment)
        try:
            reached = uv_graph.installed(
                graph, starts, environment, activation if given_activation else activation.active
            )
            outcomes.append([(key, id(entry)) for key, entry in reached.items()])
        except UserError as refused:
            outcomes.append([("refused", refused.message)])
    assert outcomes[0] == outcomes[1]
