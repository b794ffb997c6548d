"""The lock file format: golden round trips, the own YAML emitter against a real YAML parser, version checks."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from lockgen.adapters.lock.lockfile_yaml import dump_lock, load_lock, parse_lock
from lockgen.errors import LockFormatError
from lockgen.model.lock import (
    Lock,
    LockChannel,
    LockedPackage,
    LockMetadata,
    PackageHash,
    lock_document,
    lock_from_document,
)
from tests.conftest import EXAMPLE_STACK

LOCKS = sorted((EXAMPLE_STACK.parent / "locks").glob("*.conda-lock.yml"))


@pytest.mark.parametrize("path", LOCKS, ids=lambda p: p.name)
def test_render_of_parse_is_identity(path: Path) -> None:
    assert dump_lock(load_lock(path)) == path.read_text()


def _lock(meta_value: str, dep_spec: str, version: str) -> Lock:
    package = LockedPackage(
        name="pkg",
        version=version,
        manager="conda",
        platform="linux-64",
        dependencies={"dep": dep_spec},
        url="https://example.invalid/pkg.conda",
        hash=PackageHash(md5="0" * 32, sha256="1" * 64),
        build="h0_0",
    )
    meta = LockMetadata(
        content_hash={"linux-64": "ab" * 32},
        channels=(LockChannel(url="conda-forge"),),
        platforms=("linux-64",),
        sources=("stack.toml",),
        custom_metadata={"lockgen.x": meta_value},
    )
    return Lock(metadata=meta, package=(package,))


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@example(meta_value="A\n", dep_spec="1.2.3\n", version="1")  # a plain-scalar regex's `$` matched before a final newline
@given(
    meta_value=_text,
    dep_spec=_text,
    version=st.one_of(
        _text.filter(bool),
        st.from_regex(r"\A[0-9]{1,3}([._][0-9]{1,3}){0,3}[a-z]?\Z"),
        st.sampled_from(["2_6_6", "0x1f", "0o17", "0b101", "1e5", "1_000", "12.9.79", "2026c"]),
    ),
)
def test_any_string_survives_a_real_yaml_parser(meta_value: str, dep_spec: str, version: str) -> None:
    text = dump_lock(_lock(meta_value, dep_spec, version))
    data = yaml.safe_load(text)
    assert data["metadata"]["custom_metadata"]["lockgen.x"] == meta_value
    assert data["package"][0]["dependencies"]["dep"] == dep_spec
    assert data["package"][0]["version"] == version
    try:
        parsed = parse_lock(text, "x")
    except LockFormatError as refused:  # read back, the field rules refuse control characters and odd versions
        assert refused.message.startswith("lock `x`: ")
        return
    assert parsed == _lock(meta_value, dep_spec, version)


def test_unknown_version_and_garbage_are_refused(tmp_path: Path) -> None:
    good = LOCKS[0].read_text()
    with pytest.raises(LockFormatError, match="version 2"):
        parse_lock(good.replace("version: 1", "version: 2", 1), "x")
    with pytest.raises(LockFormatError, match="not valid YAML"):
        parse_lock("a: [unclosed", "x")
    with pytest.raises(LockFormatError, match=r"malformed: `package\[0\]\.manager` is `apt`, not `conda` or `pip`$"):
        parse_lock(good.replace("manager: conda", "manager: apt", 1), "x")


_CONDA_ENTRY = st.builds(
    lambda name, version, build, digest: {
        "name": name,
        "version": version,
        "manager": "conda",
        "platform": "linux-64",
        "dependencies": {},
        "hash": {"sha256": digest},
        "category": "main",
        "optional": False,
        "url": f"https://conda.anaconda.org/conda-forge/linux-64/{name}-{version}-{build}.conda",
    },
    st.from_regex(r"[a-z][a-z0-9_]{0,12}", fullmatch=True),
    st.from_regex(r"[0-9]{1,3}(\.[0-9]{1,3}){0,2}", fullmatch=True),
    st.from_regex(r"[a-z0-9]{1,8}_[0-9]", fullmatch=True),
    st.from_regex(r"[0-9a-f]{64}", fullmatch=True),
)


def _v1_document(entries: list[dict]) -> dict:
    return {
        "version": 1,
        "metadata": {
            "content_hash": {},
            "channels": [{"url": "conda-forge", "used_env_vars": []}],
            "platforms": ["linux-64"],
            "sources": ["environment.yml"],
            "time_metadata": {"created_at": "2025-01-01T00:00:00Z"},
        },
        "package": entries,
    }


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(
    st.lists(_CONDA_ENTRY, min_size=1, max_size=5, unique_by=lambda e: e["name"]),
    st.booleans(),
    st.sampled_from(["version", "hash", "optional", "url", None]),
)
def test_lockgen_and_import_read_conda_lock_v1_alike(entries: list[dict], with_build: bool, broken: str | None) -> None:
    """One reader of the v1 format (`v1_lock`): a lock lockgen reads and the same file imported give the same
    entries (import adds the `build` conda-lock leaves out, from the archive's name, which lockgen's own
    rules want written), and a document of a value of the wrong type fails both with the same message."""
    from lockgen.adapters.foreign.conda_lock_file import conda_lock

    built = [{**e, "build": e["url"].rsplit("-", 1)[1].removesuffix(".conda")} for e in entries]
    if broken is not None:  # as a hand edit or another writer leaves it
        entries[0][broken] = {"version": 1.5, "hash": "deadbeef", "optional": "maybe", "url": None}[broken]
    document = _v1_document(built if with_build and broken is None else entries)
    text = yaml.safe_dump(document)
    if broken is not None:
        with pytest.raises(LockFormatError) as mine:
            parse_lock(text, "the.yml")
        with pytest.raises(LockFormatError) as imported:
            conda_lock(yaml.safe_load(text), "d" * 64, Path("the.yml"))
        assert imported.value.message == mine.value.message and imported.value.hint != mine.value.hint
        return
    if not with_build:
        with pytest.raises(LockFormatError, match="is not a conda build string"):
            parse_lock(text, "the.yml")
    imported = conda_lock(yaml.safe_load(text), "d" * 64, Path("the.yml"))
    assert imported.packages == parse_lock(yaml.safe_dump(_v1_document(built)), "the.yml").package
    assert imported.channels == ("conda-forge",)


def _generic_text(lock: Lock) -> str:
    """The lock as the generic emitter writes its plain data, each entry a dict in conda-lock's key order: what
    `dump_lock` wrote before it wrote entries straight from the models."""
    from lockgen.adapters.lock.lockfile_yaml import HEADER, _emit_mapping, lock_to_data

    def entry(p: LockedPackage) -> dict[str, object]:
        hashes = {k: v for k, v in (("md5", p.hash.md5), ("sha256", p.hash.sha256)) if v}
        data = {
            "name": p.name,
            "version": p.version,
            "manager": p.manager,
            "platform": p.platform,
            "dependencies": dict(sorted(p.dependencies.items())),
            "url": p.url,
            "hash": hashes,
        }
        return {
            **data,
            **({"build": p.build} if p.build is not None else {}),
            "category": p.category,
            "optional": p.optional,
        }

    lines: list[str] = []
    _emit_mapping(
        {**lock_to_data(lock), "package": [entry(p) for p in sorted(lock.package, key=lambda p: p.sort_key())]},
        0,
        lines,
    )
    return HEADER + "\n".join(lines) + "\n"


_ENTRY = st.builds(
    LockedPackage,
    name=_text.filter(bool),
    version=_text,
    manager=st.sampled_from(["conda", "pip"]),
    platform=st.sampled_from(["linux-64", "linux-aarch64"]),
    dependencies=st.dictionaries(_text, _text, max_size=3),
    url=_text,
    hash=st.builds(PackageHash, md5=st.one_of(st.none(), _text), sha256=st.one_of(st.none(), _text)),
    build=st.one_of(st.none(), _text),
    category=_text,
    optional=st.booleans(),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_ENTRY, max_size=4))
def test_entries_written_straight_from_the_models_as_the_generic_emitter_writes_them(
    packages: list[LockedPackage],
) -> None:
    meta = LockMetadata(
        content_hash={}, channels=(), platforms=("linux-64", "linux-aarch64"), sources=(), custom_metadata={}
    )
    lock = Lock(metadata=meta, package=tuple(packages))
    assert dump_lock(lock) == _generic_text(lock)


@settings(max_examples=200, deadline=None)
@given(st.lists(_ENTRY, max_size=4))
def test_a_kept_lock_document_builds_the_same_records_without_a_validator(packages: list[LockedPackage]) -> None:
    """The form a checked lock is kept in (`lock_document`, through JSON) builds the very records again."""
    meta = LockMetadata(
        content_hash={"linux-64": "ab" * 32},
        channels=(LockChannel(url="https://conda.anaconda.org/conda-forge", used_env_vars=("TOKEN",)),),
        platforms=("linux-64", "linux-aarch64"),
        sources=("stack.toml",),
        custom_metadata={"lockgen.target": "cpu"},
    )
    lock = Lock(metadata=meta, package=tuple(packages))
    assert lock_from_document(json.loads(json.dumps(lock_document(lock)))) == lock


@pytest.mark.parametrize(
    "break_it",
    [
        lambda d: d["package"][0].update(name=7),
        lambda d: d["package"][0].update(hash=["sha256"]),
        lambda d: d["package"][0].update(manager="npm"),
        lambda d: d["package"][0].update(optional="no"),
        lambda d: d["package"][0]["dependencies"].update(python=3),
        lambda d: d["package"][0].pop("url"),
        lambda d: d["package"][0].update(extra="x"),
        lambda d: d["metadata"].update(channels="conda-forge"),
        lambda d: d["metadata"].update(platforms="linux-64"),
        lambda d: d["metadata"]["custom_metadata"].update({"lockgen.target": None}),
        lambda d: d.update(version="1"),
        lambda d: d["package"][0]["hash"].pop("sha256"),  # nested records too: never completed by a default
        lambda d: d["package"][0]["hash"].update(sha1="x"),
        lambda d: d["metadata"]["channels"][0].update(extra="x"),
        lambda d: d["metadata"]["channels"][0].pop("used_env_vars"),
    ],
)
def test_a_kept_lock_document_not_of_the_records_shape_is_refused(break_it: Callable[[dict], object]) -> None:
    """A kept value of another shape raises what `materialize_steps._parsed` takes as "parse the bytes again"."""
    document = json.loads(json.dumps(lock_document(load_lock(LOCKS[0]))))
    break_it(document)
    with pytest.raises((KeyError, TypeError, AttributeError)):
        lock_from_document(document)
