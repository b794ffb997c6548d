"""Every input bounded (issue 47, item 4): a file a user names is a regular file of a sane size before it is read (a
FIFO, device or socket refused by name, never waited on), a document nested past any real one is refused, not a
RecursionError, a uv.lock imports in time linear in its size, and the inputs that ended in exit 3 (a certificate dated
9999, an archive written under /proc, an image whose layer is refused checked without its lock) are refused cleanly."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.markers import Marker

from lockgen.adapters import fetch_auth, pack_archive, user_files
from lockgen.adapters.conda import conda_meta
from lockgen.adapters.distribution import registry_auth
from lockgen.adapters.image import oci_layout
from lockgen.adapters.node import signing
from lockgen.adapters.proof import conformance_store, stat_walk
from lockgen.adapters.pypi import pypi_index
from lockgen.adapters.foreign.foreign_locks import read_foreign
from lockgen.model.requests import ImportOptions
from lockgen.api.certs import export_certificate
from lockgen.api.steps.certificate_steps import read_certificate
from lockgen.core import nesting
from lockgen.errors import LockFormatError, UserError
from tests.conftest import EXAMPLE_STACK, REPO, loopback_registry
from tests.test_archive_attacks import _chain_escape, _image, _layer_tar

H200 = REPO / "envs" / "examples" / "h200-system"


def _uv_lock_of_extras(packages: int) -> str:
    """A uv.lock whose project asks a chain of packages each for its extra `fast`: as many active extras as
    packages, and every edge under a marker naming an extra."""
    parts = [
        'version = 1\nrequires-python = ">=3.10"\n\n[[package]]\nname = "app"\nversion = "0.1.0"\nsource = { '
        'virtual = "." }\ndependencies = [\n    { name = "pkg0", extra = ["fast"] },\n]\n'
    ]
    for i in range(packages):
        edge = (
            f'    {{ name = "pkg{i + 1}", extra = ["fast"], marker = "extra != \'extra-3-app-cpu\'" }},\n'
            if i + 1 < packages
            else ""
        )
        wheel = f'    {{ url = "https://files.example/pkg{i}-1.0-py3-none-any.whl", hash = "sha256:{i:064x}" }},\n'
        parts.append(
            f'\n[[package]]\nname = "pkg{i}"\nversion = "1.0"\nsource = {{ registry = "https://pypi.org/simple" }}\n'
            f"dependencies = [\n{edge}]\nwheels = [\n{wheel}]\n\n[package.optional-dependencies]\nfast = [\n{edge}]\n"
        )
    return "".join(parts)


def test_a_uv_lock_import_hands_each_marker_only_the_extras_it_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every marker was evaluated against the whole set of active extras, which the evaluator normalises item by item
    on every test, and in the activation pass that set was copied for every edge: an import quadratic in the lock's
    size (10k packages 10 s, 30k 108 s). Each marker now sees only the items it names."""
    handed: list[int] = []
    evaluate = Marker.evaluate

    def counting(self: Marker, environment: dict[str, object] | None = None, context: str = "metadata") -> bool:
        handed.append(
            len(environment["extras"]) if environment and isinstance(environment.get("extras"), (set, frozenset)) else 0
        )  # type: ignore[arg-type]
        return evaluate(self, environment, context)  # type: ignore[arg-type]

    monkeypatch.setattr(Marker, "evaluate", counting)
    lock = tmp_path / "uv.lock"
    lock.write_text(_uv_lock_of_extras(60))
    imported = read_foreign(lock, ImportOptions(python="3.12"))
    assert {p.name for p in imported.packages} == {f"pkg{i}" for i in range(60)}
    assert handed and max(handed) <= 1, max(handed)


def _one_error(result: subprocess.CompletedProcess[str], code: int = 1) -> str:
    """The single `error:` line of a refused command (with its `hint:`), no traceback."""
    assert result.returncode == code, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "hint:" in result.stderr and "Traceback" not in result.stderr, result.stderr
    return errors[0]


class _Waited(BaseException):
    """A block ran past its time (a BaseException: no reader's `except OSError` or `except Exception` takes it)."""


@contextlib.contextmanager
def _within(seconds: int) -> Iterator[None]:
    """Fails the block (`_Waited`) if it runs past `seconds`: an open of a FIFO waits for a writer that never comes."""

    def waited(signum: int, frame: object) -> None:
        raise _Waited(f"still waiting after {seconds} s (on the FIFO?)")

    previous = signal.signal(signal.SIGALRM, waited)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`lockgen ARGS`, given up on after `timeout` seconds: a command that waits on a FIFO fails the test."""
    return subprocess.run(
        [sys.executable, "-m", "lockgen", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
        timeout=timeout,
    )


@pytest.fixture
def signed(tmp_path: Path) -> tuple[Path, Path]:
    """(a certificate signed with a fresh key, that key's public half)."""
    key, public = signing.keygen(tmp_path / "keys" / "k")
    document = json.loads((H200 / "h200-full.cert.json").read_text())
    document["signature"] = signing.sign(document["certificate"], key)
    path = tmp_path / "signed.cert.json"
    path.write_text(signing.render(document))
    return path, public


@pytest.mark.slow
@pytest.mark.parametrize(
    "command",
    [
        ("cert", "verify", "{fifo}"),
        ("cert", "verify", "{cert}", "--key", "{fifo}"),
        ("cert", "export", "{fifo}", "--format", "nfd"),
        ("detect", str(EXAMPLE_STACK), "--node", "{fifo}"),
        ("import", "{fifo}", "-t", "cpu", "-o", "{tmp}/out.yml"),
        ("unpack", "{fifo}", "--prefix", "{tmp}/env"),
        ("resolve", "{fifo}"),
        ("render", "{fifo}"),
        (
            "fleet",
            "kubernetes",
            "--image",
            "docker://r.example/t@sha256:" + "5e" * 32,
            "--lockgen-image",
            "r.example/l@sha256:" + "0f" * 32,
            "--arch",
            "cpu",
            "--certs-claim",
            "c",
            "--lock",
            "{fifo}",
            "--out",
            "{tmp}/env",
        ),
    ],
)
def test_a_fifo_named_as_an_input_is_refused_by_name_not_waited_on(
    tmp_path: Path, signed: tuple[Path, Path], command: tuple[str, ...]
) -> None:
    """A FIFO given as an archive, key, certificate, node facts file, stack or lock (fleet kubernetes' --lock too):
    the open waited for a writer forever."""
    fifo = tmp_path / "input.fifo"
    os.mkfifo(fifo)
    line = _one_error(_cli(*(part.format(fifo=fifo, cert=signed[0], tmp=tmp_path) for part in command)))
    assert "a FIFO, not a regular file" in line, line
    assert not (tmp_path / "out.yml").exists() and not (tmp_path / "env").exists()


@pytest.mark.slow
@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_device_as_a_key_is_refused_at_once(signed: tuple[Path, Path], device: str) -> None:
    """`cert verify --key /dev/zero` read 6 GB in 20 s before giving up on it."""
    started = time.monotonic()
    line = _one_error(_cli("cert", "verify", str(signed[0]), "--key", device))
    assert "a character device, not a regular file" in line and time.monotonic() - started < 30, line


def test_a_key_or_certificate_past_its_cap_is_refused_after_reading_one_byte_past_it(
    tmp_path: Path, signed: tuple[Path, Path]
) -> None:
    """A regular file of 2 GB named as a key is a key of no kind: refused having read at most 1 MiB and a byte."""
    huge = tmp_path / "huge.pub"
    with huge.open("wb") as stream:
        stream.truncate(2 << 30)  # sparse: nothing written
    with pytest.raises(UserError, match="over 1 MiB, larger than any key"):
        signing.public_fingerprint(huge)
    certificate = tmp_path / "huge.cert.json"
    with certificate.open("wb") as stream:
        stream.truncate(user_files.CERTIFICATE_LIMIT + 1)
    with pytest.raises(UserError, match="larger than any certificate"):
        read_certificate(certificate, None)


def test_a_file_under_its_cap_is_read_in_a_buffer_of_its_size_and_read_on_if_it_grew(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A certificate of 25 KB under the 16 MiB cap is read without allocating the cap (a buffered read of the cap
    allocated and freed 16 MiB a file: more than a fleet of 10,000 spent reading); a file exactly at its cap is
    read, one byte past it refused; a file that grew after its size was taken is read to its end, or refused."""
    import tracemalloc

    certificate = tmp_path / "n1.cert.json"
    certificate.write_bytes(b"x" * 25_000)
    tracemalloc.start()
    try:
        data = user_files.read_bytes(certificate, user_files.CERTIFICATE_LIMIT, "certificate")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert data == b"x" * 25_000 and peak < 1 << 20, peak
    assert user_files.read_bytes(certificate, 25_000, "certificate") == data
    with pytest.raises(user_files.RefusedFile, match="larger than any certificate"):
        user_files.read_bytes(certificate, 24_999, "certificate")
    (tmp_path / "empty").write_bytes(b"")
    assert user_files.read_bytes(tmp_path / "empty", 10, "key") == b""
    real_fstat = os.fstat

    def size_taken_early(fd: int) -> os.stat_result:  # the file grew after fstat: 10 bytes then, 25,000 now
        status = real_fstat(fd)
        return os.stat_result((*status[:6], 10, *status[7:10]))

    monkeypatch.setattr(user_files.os, "fstat", size_taken_early)
    assert user_files.read_bytes(certificate, user_files.CERTIFICATE_LIMIT, "certificate") == data
    with pytest.raises(user_files.RefusedFile, match="larger than any certificate"):
        user_files.read_bytes(certificate, 20_000, "certificate")


def _depth(value: object) -> int:
    """The nesting depth of a parsed JSON value (a scalar 0, `[]` 1)."""
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab\n'),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet='[]{}"\\k', max_size=4), inner, max_size=3)
    ),
    max_leaves=40,
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(value=_JSON, limit=st.integers(min_value=0, max_value=8))
def test_the_depth_bound_measures_what_the_parser_would_descend(value: object, limit: int) -> None:
    """Brackets, quotes and backslashes inside strings count for nothing; every level outside them counts once."""
    data = json.dumps(value).encode()
    assert nesting.depth_within(data, limit) == (_depth(value) <= limit)
    if _depth(value) <= limit:
        assert nesting.loads(data, limit) == value
    else:
        with pytest.raises(nesting.TooDeepError):
            nesting.loads(data, limit)


@pytest.mark.parametrize(
    "data",
    [b"[" * 100_000, b"[" * 100_000 + b"]" * 100_000, b'{"a":' * 50_000 + b"1" + b"}" * 50_000, b"[" * 70 + b"1"],
    ids=["unclosed", "closed", "objects", "unclosed-past-the-bound"],
)
def test_json_nested_past_the_bound_is_a_value_error_not_a_recursion_error(data: bytes) -> None:
    with pytest.raises(nesting.TooDeepError):
        nesting.loads(data)


DEEP = "[" * 100_000 + "]" * 100_000


def test_a_deep_conformance_record_is_a_recheck_not_a_crash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A record nested past Python's parser under $LOCKGEN_HOME/conformance ended `check --lock` in RecursionError
    (exit 3); a record is only a saving, so one that cannot be read is none: the files are hashed again."""
    monkeypatch.setenv(
        "LOCKGEN_HOME", str(tmp_path / "home")
    )  # its own: the worker's home holds other tests' records, which the globs below would find
    prefix = tmp_path / "env"
    prefix.mkdir()
    conformance_store.save(prefix, "0" * 64, {"bin/x": [1, 2, 3, 4, 5, "a" * 64]})
    assert conformance_store.load(prefix, "0" * 64)
    records = list((Path(os.environ["LOCKGEN_HOME"]) / "conformance").glob("*.json"))
    for record in records:
        record.write_text(DEEP)
    assert conformance_store.load(prefix, "0" * 64) == {}
    conformance_store.save_verdict(
        prefix, "0" * 64, ["ctx"], stat_walk.TreeFingerprint("tree", 1, True), {"clean": True}
    )
    verdicts = list((Path(os.environ["LOCKGEN_HOME"]) / "conformance").glob("*.verdict.json"))
    verdicts[0].write_text(DEEP)
    assert conformance_store.load_verdict(prefix, "0" * 64, ["ctx"]) is None
    verdicts[0].unlink()
    os.mkfifo(verdicts[0])
    assert conformance_store.load_verdict(prefix, "0" * 64, ["ctx"]) is None  # a FIFO there: none, not a hang


def test_a_deep_pep_691_page_is_not_an_index_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An index answering JSON nested past the parser ended resolve in RecursionError (exit 3)."""
    page = tmp_path / "index" / "torch" / "index.v1_json"
    page.parent.mkdir(parents=True)
    page.write_text('{"files": ' + DEEP + "}")
    monkeypatch.setenv("LOCKGEN_FILE_ROOTS", str(tmp_path))
    with pytest.raises(UserError, match="is not a PEP 691 project page"):
        pypi_index.project_wheels("torch", (tmp_path / "index").as_uri())


def test_a_deep_certificate_is_refused_as_no_certificate(tmp_path: Path) -> None:
    certificate = tmp_path / "deep.cert.json"
    certificate.write_text(DEEP)
    with pytest.raises(LockFormatError, match="nested deeper than 64 levels"):
        read_certificate(certificate, None)


def test_a_certificate_dated_9999_exported_for_nfd_is_one_error(tmp_path: Path, signed: tuple[Path, Path]) -> None:
    """Its features' expiry, a week after the run, is past the calendar's end: OverflowError, exit 3."""
    key = signed[1].with_suffix("")
    document = json.loads((H200 / "h200-full.cert.json").read_text())
    document["certificate"]["created"] = "9999-12-31T23:00:00Z"
    document["certificate"]["subject"]["lock_sha256"] = "a" * 64
    document["signature"] = signing.sign(document["certificate"], key)
    certificate = tmp_path / "late.cert.json"
    certificate.write_text(signing.render(document))
    with pytest.raises(UserError, match="would expire after the year 9999"):
        export_certificate(certificate, "nfd", [signed[1]], None)


def test_an_archive_or_lock_written_where_no_file_can_be_made_is_one_error(tmp_path: Path) -> None:
    """/proc/self is a folder that takes no new file: `pack --out /proc/self/x.tar` ended in FileNotFoundError (exit
    3)."""
    with pytest.raises(UserError, match="takes no new file"):
        pack_archive.write(Path("/proc/self/x.tar"), [("lockgen/lock.yml", b"x")], [])
    line = _one_error(
        _cli(
            "import",
            str(REPO / "tests" / "fixtures" / "foreign" / "tiny.uv.lock"),
            "-t",
            "cpu",
            "-o",
            "/proc/self/x.yml",
        )
    )
    assert "/proc/self" in line and "takes no new file" in line, line


@pytest.mark.slow
def test_an_image_whose_layers_put_no_environment_at_its_prefix_is_refused_without_a_lock(tmp_path: Path) -> None:
    """CVE-2025-4517's chain of links as a layer: confined by the extractor, it unpacks, and leaves nothing at /opt/env.
    With --lock the image was refused before unpacking (its labels name no lock) or reported every locked file
    missing (the conformance check walks the lock's files); without, `check --image` and `verify --image` built the
    environment's manifest from a folder that was not there: unexpected FileNotFoundError (exit 3)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("keep me\n")
    plain = _layer_tar(_chain_escape(outside))
    layout = _image(
        tmp_path, plain, "application/vnd.oci.image.layer.v1.tar", "sha256:" + hashlib.sha256(plain).hexdigest()
    )
    for command in (("check", "--image", str(layout)), ("verify", "--image", str(layout), "--arch", "sm90")):
        line = _one_error(_cli(*command))
        assert "holds no environment at `/opt/env`" in line, line
    assert (outside / "secret").read_text() == "keep me\n" and sorted(p.name for p in outside.iterdir()) == ["secret"]


@pytest.mark.slow
def test_documents_nested_past_their_readers_are_one_error(tmp_path: Path) -> None:
    """A lock of 100,000 nested flow sequences crashed `render` (libyaml's composer recursing past the C stack:
    a segmentation fault); an image layout's index.json and a pyproject.toml nested past Python's readers ended
    `check --image` and `import --project` in RecursionError (exit 3)."""
    lock = tmp_path / "deep.conda-lock.yml"
    lock.write_text("version: 1\nmetadata: " + DEEP + "\npackage: []\n")
    refused = _one_error(
        _cli("render", str(lock))
    )  # by lockgen's walk, or by a PyYAML that bounds nesting itself (a new venv's)
    assert "nests deeper than any lock" in refused or "exceeded maximum nesting depth" in refused, refused
    layout = tmp_path / "layout"
    layout.mkdir()
    (layout / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    (layout / "index.json").write_text('{"schemaVersion": 2, "manifests": ' + DEEP + "}")
    assert "nested deeper than 64 levels" in _one_error(_cli("check", "--image", str(layout)))
    project = tmp_path / "pyproject.toml"
    project.write_text('[project]\nname = "x"\nodd = ' + DEEP + "\n")
    line = _one_error(
        _cli(
            "import",
            str(REPO / "tests" / "fixtures" / "foreign" / "tiny.uv.lock"),
            "-t",
            "cpu",
            "-o",
            str(tmp_path / "out.yml"),
            "--project",
            str(project),
        )
    )
    assert "nests deeper than a reader goes" in line and not (tmp_path / "out.yml").exists(), line


def test_credential_files_nested_past_the_bound_are_one_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """RATTLER_AUTH_FILE and a registry auth file nested past the parser ended a fetch in RecursionError."""
    auth = tmp_path / "auth.json"
    auth.write_text('{"h": ' + DEEP + "}")
    monkeypatch.setenv("RATTLER_AUTH_FILE", str(auth))
    monkeypatch.setenv("REGISTRY_AUTH_FILE", str(auth))
    with pytest.raises(UserError, match="nested deeper than 64 levels"):
        fetch_auth._auth_file_entry("h")
    with pytest.raises(UserError, match="cannot read the registry auth file"):
        registry_auth.credential("h", "r")


@pytest.mark.slow
def test_a_local_channel_whose_index_is_a_fifo_is_refused_by_name(tmp_path: Path) -> None:
    """A file:// channel's repodata.json that is a FIFO held resolve forever."""
    channel = tmp_path / "channel"
    (channel / "noarch").mkdir(parents=True)
    (channel / "noarch" / "repodata.json").write_text(
        '{"info": {"subdir": "noarch"}, "packages": {}, "packages.conda": {}}'
    )
    (channel / "linux-64").mkdir()
    os.mkfifo(channel / "linux-64" / "repodata.json")
    stack = tmp_path / "stack" / "stack.toml"
    stack.parent.mkdir()
    stack.write_text(
        f'[stack]\nname = "x"\nchannels = ["{channel.as_uri()}"]\n[dependencies]\nlibfoo = '
        '"*"\n[targets.cpu]\narch = "cpu"\n'
    )
    line = _one_error(_cli("resolve", str(stack)))
    assert "a FIFO, not a regular file" in line, line


@pytest.mark.parametrize("kind", ["fifo", "deep", "list"])
def test_a_conda_meta_record_that_is_no_record_is_refused_by_name(tmp_path: Path, kind: str) -> None:
    """An environment's conda-meta/*.json that is a FIFO held freeze forever; one nested past the parser, or a list,
    ended it in RecursionError or AttributeError (exit 3)."""
    record = tmp_path / "env" / "conda-meta" / "x-1-0.json"
    record.parent.mkdir(parents=True)
    if kind == "fifo":
        os.mkfifo(record)
    else:
        record.write_text(DEEP if kind == "deep" else "[]")
    with _within(20), pytest.raises(UserError, match="is no conda-meta record"):
        conda_meta.listed_paths(tmp_path / "env")


def _layout_with_a_fifo(tmp_path: Path, which: str) -> tuple[Path, Path]:
    """An image layout (one layer) whose `which` file (index.json, or the manifest, config or layer blob) is a FIFO."""
    plain = _layer_tar([("opt/env/x", "f", b"x")])
    layout = _image(
        tmp_path, plain, "application/vnd.oci.image.layer.v1.tar", "sha256:" + hashlib.sha256(plain).hexdigest()
    )
    blobs = layout / "blobs" / "sha256"
    manifest_digest = json.loads((layout / "index.json").read_text())["manifests"][0]["digest"]
    manifest = json.loads((blobs / manifest_digest.split(":")[1]).read_text())
    digest = {
        "manifest": manifest_digest,
        "config": manifest["config"]["digest"],
        "layer": manifest["layers"][0]["digest"],
    }.get(which)
    path = layout / "index.json" if digest is None else blobs / digest.split(":")[1]
    path.unlink()
    os.mkfifo(path)
    return layout, path


@pytest.mark.parametrize("which", ["index.json", "manifest", "config"])
def test_a_fifo_in_an_image_layout_is_refused_by_name_not_waited_on(tmp_path: Path, which: str) -> None:
    """A layout's index.json, or its manifest or config blob, that is a FIFO held every reader of the image forever
    (`check --image` finds no layout without a regular index.json first; an adopted base is read directly)."""
    layout, _ = _layout_with_a_fifo(tmp_path, which)
    with _within(20), pytest.raises(LockFormatError, match="a FIFO, not a regular file"):
        oci_layout.read_image(layout)


@pytest.mark.slow
def test_a_layer_blob_that_is_a_fifo_is_named_by_check_image(tmp_path: Path) -> None:
    """`check --image` called a layer blob that is a FIFO missing."""
    layout, _ = _layout_with_a_fifo(tmp_path, "layer")
    line = _one_error(_cli("check", "--image", str(layout)))
    assert "cannot be read: a FIFO, not a regular file" in line, line


def test_a_base_layout_s_layer_that_is_a_fifo_is_refused_by_name_not_waited_on(tmp_path: Path) -> None:
    """An adopted base layout's layers, read as lookups need them (`layer_reader`) and opened by export to carry
    them (`layer_opener`), waited on a layer blob that is a FIFO forever."""
    from lockgen.api.steps import base_steps

    layout, _ = _layout_with_a_fifo(tmp_path, "layer")
    count, layer = oci_layout.layer_reader(layout)
    with _within(20), pytest.raises(LockFormatError, match="cannot be read: a FIFO, not a regular file"):
        layer(count - 1)
    manifest, _, _ = oci_layout.read_image(layout)
    with _within(20), pytest.raises(LockFormatError, match="cannot be read: a FIFO, not a regular file"):
        base_steps.layer_opener(layout)(manifest["layers"][0])


@pytest.mark.slow
def test_push_refuses_a_layer_blob_that_is_a_fifo_by_name(tmp_path: Path) -> None:
    """`lockgen push` of a layout whose layer blob is a FIFO counted it missing (the layout taken for a shallow
    one, its base registry asked for the layer) instead of naming it; skopeo, given it, would wait for ever."""
    layout, fifo = _layout_with_a_fifo(tmp_path, "layer")
    (tmp_path / "registry").mkdir()
    with loopback_registry(tmp_path / "registry") as host:
        line = _one_error(_cli("push", str(layout), f"docker://{host}/pushed:1", "--insecure", timeout=60))
    assert f"{fifo.name[:12]}" in line and "cannot be read: a FIFO, not a regular file" in line, line


@pytest.mark.slow
def test_a_shallow_push_opens_its_own_blobs_as_regular_files_only(tmp_path: Path) -> None:
    """The shallow push (`registry_image.push`) opened a layout's blob with plain `open` once `is_file` said yes; a
    blob that is no regular file by then is refused naming it, not waited on nor taken from the base registry."""
    from lockgen.adapters.image import registry_image

    layout, fifo = _layout_with_a_fifo(tmp_path, "layer")
    index = json.loads((layout / "index.json").read_text())["manifests"][0]
    manifest_bytes = (layout / "blobs" / "sha256" / index["digest"].split(":")[1]).read_bytes()
    (tmp_path / "registry").mkdir()
    with loopback_registry(tmp_path / "registry") as host, _within(30):
        with pytest.raises(LockFormatError, match=f"{fifo.name[:12]}.* cannot be read: a FIFO, not a regular file"):
            registry_image.push(
                layout,
                manifest_bytes,
                json.loads(manifest_bytes),
                index["mediaType"],
                f"docker://{host}/pushed:1",
                f"{host}/base:1",
                True,
                lambda _: None,
            )


def test_an_sbom_that_is_a_fifo_is_refused_by_name_not_waited_on(tmp_path: Path) -> None:
    """`push --attest --sbom FIFO` and `attest --sbom FIFO` waited for a writer forever; the SBOM is read before
    anything of the image is looked at."""
    from lockgen.api.steps import attestation_steps

    fifo = tmp_path / "sbom.cdx.json"
    os.mkfifo(fifo)
    with _within(20), pytest.raises(UserError, match="is not a CycloneDX SBOM"):
        attestation_steps._sbom_of(fifo, None, None)  # type: ignore[arg-type]
