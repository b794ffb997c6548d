"""Fuzzing every reader through the use case that reads it (hypothesis, bounded): foreign locks through
`import`, lockgen locks through `render` and `diff`, certificates through `cert verify`, OCI index,
manifest and config through `check --image`. The property everywhere: it works, or it fails with a
LockgenError that has a one-line message and a hint (the CLI's exit 1 or 2), and nothing is written.
Never another exception (the CLI's exit 3, "report the traceback")."""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lockgen.api.certs import check_certificate
from lockgen.api.check import check_image
from lockgen.model.requests import Prefix
from lockgen.api.import_lock import import_lock
from lockgen.api.locks import diff, render
from lockgen.errors import LockgenError
from tests.conftest import EXAMPLE_STACK, REPO

FOREIGN = sorted(
    p for p in (Path(__file__).parent / "fixtures" / "foreign").rglob("*") if p.is_file() and p.name != "pyproject.toml"
) + [EXAMPLE_STACK.parent / "locks" / "h100.conda-lock.yml"]
LOCKS = sorted((EXAMPLE_STACK.parent / "locks").glob("*.conda-lock.yml"))
CERTIFICATE = REPO / "envs" / "examples" / "h200-system" / "h200-quick.cert.json"
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _mutated(text: str, data: st.DataObject) -> str:
    """One edit of the kinds damaged files show: cut short, a line dropped or doubled, a value replaced by a
    list or a mapping, an indent moved, bytes that are not UTF-8 where they are read as text."""
    lines = text.splitlines(keepends=True)
    index = data.draw(st.integers(0, max(len(lines) - 1, 0)))
    kind = data.draw(st.sampled_from(["truncate", "cut", "drop", "double", "list", "mapping", "indent", "garbage"]))
    if kind == "truncate":
        return "".join(lines[:index])
    if kind == "cut":  # mid-line
        return "".join(lines[:index]) + lines[index][: len(lines[index]) // 2]
    if kind == "drop":
        return "".join(lines[:index] + lines[index + 1 :])
    if kind == "double":
        return "".join(lines[: index + 1] + lines[index:])
    if kind in ("list", "mapping"):
        key, sep, _ = lines[index].partition(":" if ":" in lines[index] else "=")
        replacement = key + (sep or ":") + (" [1, [2]]\n" if kind == "list" else " {a: 1}\n")
        return "".join(lines[:index] + [replacement] + lines[index + 1 :])
    if kind == "indent":
        return "".join(lines[:index] + ["   " + lines[index]] + lines[index + 1 :])
    return "".join(lines[:index]) + data.draw(st.text(max_size=20)) + "".join(lines[index:])


def _clean_failure(error: LockgenError) -> None:
    assert error.message and "\n" not in error.message and error.hint, (error.message, error.hint)


@pytest.mark.slow
@FUZZ
@given(data=st.data(), source=st.sampled_from(FOREIGN))
def test_import_of_a_damaged_foreign_lock(tmp_path: Path, data: st.DataObject, source: Path) -> None:
    damaged = tmp_path / source.name
    damaged.write_text(_mutated(source.read_text(), data))
    out = tmp_path / "out" / "t.conda-lock.yml"
    out.unlink(missing_ok=True)
    try:
        import_lock(damaged, "t", out)
    except LockgenError as error:
        _clean_failure(error)
        assert not out.exists()


@pytest.mark.slow
@FUZZ
@given(data=st.data(), source=st.sampled_from(LOCKS))
def test_render_and_diff_of_a_damaged_lock(tmp_path: Path, data: st.DataObject, source: Path) -> None:
    damaged = tmp_path / "damaged.conda-lock.yml"
    damaged.write_text(_mutated(source.read_text(), data))
    for read in (lambda: render(damaged, None), lambda: diff(source, damaged)):
        try:
            read()
        except LockgenError as error:
            _clean_failure(error)


def _edited_value(data: st.DataObject) -> object:
    return data.draw(
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(),
            st.text(max_size=8),
            st.lists(st.integers(), max_size=2),
            st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
        )
    )


def _edit_json(document: object, data: st.DataObject, depth: int = 0) -> object:
    """One key deleted or one value replaced, somewhere down the tree."""
    if isinstance(document, dict) and document and depth < 6:
        key = data.draw(st.sampled_from(sorted(document)))
        action = data.draw(st.sampled_from(["descend", "delete", "replace"]))
        edited = dict(document)
        if action == "delete":
            del edited[key]
        elif action == "replace":
            edited[key] = _edited_value(data)
        else:
            edited[key] = _edit_json(document[key], data, depth + 1)
        return edited
    if isinstance(document, list) and document and depth < 6:
        index = data.draw(st.integers(0, len(document) - 1))
        return document[:index] + [_edit_json(document[index], data, depth + 1)] + document[index + 1 :]
    return _edited_value(data)


@pytest.mark.slow
@FUZZ
@given(data=st.data())
def test_cert_verify_of_an_edited_certificate(tmp_path: Path, data: st.DataObject) -> None:
    """Edited and re-rendered canonically (so the byte check passes and the model is what is tested)."""
    from lockgen.adapters.node.signing import render as canonical

    edited = _edit_json(json.loads(CERTIFICATE.read_text()), data)
    path = tmp_path / "edited.cert.json"
    path.write_text(canonical(edited) if isinstance(edited, dict) else json.dumps(edited))
    key = REPO / "envs" / "examples" / "h200-system" / "h200-signing.pub"
    for public in (None, key):
        try:
            check_certificate(path, [public] if public else [], None)
        except LockgenError as error:
            _clean_failure(error)
            continue
        assert public is None or edited == json.loads(CERTIFICATE.read_text())  # with the key, only the original


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.test_export import make_lock

    from lockgen.api.export import export
    from lockgen.model.requests import ExportRequest

    folder = tmp_path_factory.mktemp("image")
    with pytest.MonkeyPatch.context() as patch:  # restores whatever LOCKGEN_HOME was, set or not
        patch.setenv("LOCKGEN_HOME", str(folder / "home"))
        export(ExportRequest(make_lock(folder, "1.0"), folder / "img"), lambda _: None)
    return folder / "img"


def _put_blob(layout: Path, content: bytes) -> dict[str, object]:
    digest = hashlib.sha256(content).hexdigest()
    (layout / "blobs" / "sha256" / digest).write_bytes(content)
    return {"digest": f"sha256:{digest}", "size": len(content)}


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), part=st.sampled_from(["index", "manifest", "config"]))
def test_check_image_of_an_edited_layout(tmp_path: Path, image: Path, data: st.DataObject, part: str) -> None:
    """The index edited in place; a manifest or config edited and stored under its new digest, with the
    references above it rewritten, so the reader gets past the hash checks to the JSON itself."""
    layout = Path(tempfile.mkdtemp(dir=tmp_path)) / "img"  # a fresh copy per example
    shutil.copytree(image, layout)
    index = json.loads((layout / "index.json").read_text())
    if part == "index":
        index = _edit_json(index, data)
    else:
        descriptor = index["manifests"][0]
        manifest_path = layout / "blobs" / "sha256" / descriptor["digest"].split(":", 1)[1]
        manifest = json.loads(manifest_path.read_text())
        if part == "config":
            config_path = layout / "blobs" / "sha256" / manifest["config"]["digest"].split(":", 1)[1]
            config = _edit_json(json.loads(config_path.read_text()), data)
            manifest["config"].update(_put_blob(layout, json.dumps(config).encode()))
        else:
            manifest = _edit_json(manifest, data)
        descriptor.update(_put_blob(layout, json.dumps(manifest).encode()))
    (layout / "index.json").write_text(json.dumps(index))
    try:
        check_image(layout)
    except LockgenError as error:
        _clean_failure(error)
    finally:
        shutil.rmtree(layout.parent)


@pytest.mark.slow
@FUZZ
@given(data=st.data())
def test_a_team_stack_on_a_damaged_base_lock(tmp_path: Path, data: st.DataObject) -> None:
    """`extends` naming a lock: whatever the lock file holds, reading the team stack parses or fails as one
    located error line (the base lock is read before the team stack)."""
    from lockgen.adapters.lock.stack_file import read_stack

    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    base = REPO / "envs" / "examples" / "h200-system" / "locks" / "h200.conda-lock.yml"
    (folder / "base.conda-lock.yml").write_text(
        _mutated(base.read_text()[:6000], data), encoding="utf-8", errors="replace"
    )
    extends = data.draw(
        st.sampled_from(["base.conda-lock.yml", "missing.conda-lock.yml", "../x.yaml", "img-dir", "base.toml"])
    )
    (folder / "team.toml").write_text(
        f'[stack]\nname = "t"\nextends = "{extends}"\n[pypi-dependencies]\nsix = "*"\n[targets.h200]\narch = "cpu"\n'
    )
    try:
        read_stack(folder / "team.toml")
    except LockgenError as error:
        _clean_failure(error)


@pytest.fixture(scope="module")
def tiny_channel_lock(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.channel_factory import Pkg, build_channel, cpu_lock

    folder = tmp_path_factory.mktemp("tiny")
    channel = build_channel(
        folder / "channel",
        [
            Pkg("hello-data", "1.0", subdir="noarch", files={"share/hello.txt": "1\n"}),
            Pkg("hello-tool", "2.0", depends=("hello-data",), files={"bin/hello": "hi\n"}),
        ],
    )
    return cpu_lock(folder, channel.as_uri(), ["hello-tool"])


@pytest.mark.slow
@FUZZ
@given(data=st.data())
def test_materialize_and_check_of_a_damaged_lock(
    tmp_path: Path, tiny_channel_lock: Path, data: st.DataObject, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A damaged lock of a real local channel through the commands that act on it: an environment, or one
    clean error and no environment; nothing outside the run's folders."""
    from lockgen.api.check import check_lock
    from lockgen.api.materialize import materialize

    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    damaged = tmp_path / "damaged.conda-lock.yml"
    damaged.write_text(_mutated(tiny_channel_lock.read_text(), data))
    prefix = tmp_path / "env"
    shutil.rmtree(prefix, ignore_errors=True)
    try:
        made, _ = materialize(damaged, None, prefix, lambda _: None)
    except LockgenError as error:
        _clean_failure(error)
        assert not prefix.exists()
        return
    try:
        check_lock(damaged, Prefix(made))
    except LockgenError as error:
        _clean_failure(error)
