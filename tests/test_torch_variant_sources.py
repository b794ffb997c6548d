"""torch from PyTorch's per-variant indexes, chosen per target, offline: loopback PEP 691 indexes the test builds,
one standing in for PyPI (torch 2.10 cu128, 2.14.1 cu130, 2.15.0 cu132, as pypi.org's Linux torch is) and one for
download.pytorch.org/whl/cu126 (`2.13.0+cu126`, `2.14.1+cu126`), served under a mirror's prefix too."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lockgen.adapters.lock.lockfile_yaml import load_lock
from lockgen.errors import LockgenError
from tests.conftest import run_cli
from tests.range_server import RangeServer, Site
from tests.test_newer_releases import publish
from tests.wheel_index import Wheel

X86 = "cp311-cp311-manylinux_2_28_x86_64"
PYPI = [
    Wheel("torch", "2.10.0", tag=X86, requires=("nvidia-cuda-runtime-cu12==12.8.90", "filelock")),
    Wheel("torch", "2.14.1", tag=X86, requires=("cuda-toolkit[cudart]==13.0.3", "filelock")),
    Wheel("torch", "2.15.0", tag=X86, requires=("cuda-toolkit[cudart]==13.2.2", "filelock")),
    Wheel("nvidia-cuda-runtime-cu12", "12.8.90"),
    Wheel("nvidia-cuda-runtime-cu12", "12.6.77"),
    Wheel("cuda-toolkit", "13.0.3"),
    Wheel("cuda-toolkit", "13.2.2"),
    Wheel("filelock", "3.0.0"),
]
CU126 = [
    Wheel("torch", f"{v}+cu126", tag=X86, requires=("nvidia-cuda-runtime-cu12==12.6.77", "filelock"))
    for v in ("2.13.0", "2.14.1")
] + [
    Wheel(
        "torch",
        "2.14.1+cu126",
        tag="cp311-cp311-manylinux_2_28_aarch64",
        requires=("nvidia-cuda-runtime-cu12==12.6.77", "filelock"),
    )
]
TARGETS = (
    '[targets.v100]\narch = "sm70"\ndriver = "575.57.08"\n'  # CUDA 12.9: PyPI's 2.11 on are cu130
    '[targets.h100]\narch = "sm90"\ndriver = "580.65.06"\n'
)  # CUDA 13.0: PyPI's 2.14 (cu130) is as new


@pytest.fixture
def indexes(tmp_path: Path):
    pypi, pytorch = Site(), Site()
    publish(pypi, tmp_path / "pypi-wheels", PYPI)
    publish(pytorch, tmp_path / "cu126-wheels", CU126)
    for path in list(pytorch.files):  # the same index under a mirror's prefix (pages link ../../files/)
        moved = (
            path.replace("/simple/", "/mirror/whl/cu126/", 1) if path.startswith("/simple/") else "/mirror/whl" + path
        )
        pytorch.files[moved] = pytorch.files[path]
    servers = RangeServer(pypi), RangeServer(pytorch)
    yield servers[0].url, servers[1].url, pytorch
    for server in servers:
        server.stop()


def stack(folder: Path, pypi: str, options: str, targets: str = TARGETS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "stack.toml"
    path.write_text(
        '[stack]\nname = "variants"\npython = "3.11"\n[pypi-dependencies]\ntorch = '
        f'">=2.4"\n[pypi-options]\nindex-url = "{pypi}/simple"\n{options}\n{targets}'
    )
    return path


def torch_of(folder: Path, target: str):
    return next(p for p in load_lock(folder / "locks" / f"{target}.conda-lock.yml").package if p.name == "torch")


def test_a_v100_takes_the_newest_cu126_build_and_an_h100_keeps_pypi(tmp_path: Path, indexes) -> None:
    pypi, pytorch, _ = indexes
    path = stack(tmp_path / "a", pypi, f'torch-indexes = {{ cu126 = "{pytorch}/simple" }}')
    done = run_cli("resolve", str(path))
    assert done.returncode == 0, done.stderr
    v100 = torch_of(path.parent, "v100")
    assert v100.version == "2.14.1+cu126" and v100.url.startswith(pytorch)  # not PyPI's last sm_70 release, 2.10
    lock = load_lock(path.parent / "locks" / "v100.conda-lock.yml")
    runtime = next(p for p in lock.package if p.name == "nvidia-cuda-runtime-cu12")
    assert runtime.version == "12.6.77" and runtime.url.startswith(pypi)  # only torch is routed
    meta = lock.metadata.custom_metadata
    assert meta["lockgen.torch-index.linux-64"] == f"torch @ {pytorch}/simple"
    assert meta["lockgen.torch-sources"] == f"{pypi}/simple; cu126 @ {pytorch}/simple"
    assert meta["lockgen.pypi-constraints.linux-64"].split("; ")[0] == "torch>=2.13,<2.15"
    line = (
        f"torch 2.14.1+cu126 from cu126 @ {pytorch}/simple (PyPI's 2.14 build, cu130: driver-floor); 2.15 passed "
        "over by driver-floor"
    )
    assert meta["lockgen.decision.linux-64"].startswith(line) and f"v100 on linux-64: {line}" in done.stderr
    h100 = torch_of(path.parent, "h100")
    assert h100.version == "2.14.1" and h100.url.startswith(pypi)  # the same release: PyPI is kept
    assert (
        "lockgen.torch-index.linux-64"
        not in load_lock(path.parent / "locks" / "h100.conda-lock.yml").metadata.custom_metadata
    )
    assert run_cli("resolve", str(path), "--check").returncode == 0
    again = stack(tmp_path / "b", pypi, f'torch-indexes = {{ cu126 = "{pytorch}/simple" }}')
    assert run_cli("resolve", str(again)).returncode == 0
    for target in ("v100", "h100"):  # the same inputs give the same bytes, in another folder
        name = f"locks/{target}.conda-lock.yml"
        assert (again.parent / name).read_bytes() == (path.parent / name).read_bytes()


def test_the_mirror_prefix_replaces_pytorchs_base_for_a_named_variant(tmp_path: Path, indexes) -> None:
    pypi, pytorch, _ = indexes
    path = stack(
        tmp_path,
        pypi,
        f'torch-variants = ["cu126"]\ntorch-mirror = "{pytorch}/mirror/whl"',
        targets='[targets.v100]\narch = "sm70"\ndriver = "575.57.08"\n',
    )
    done = run_cli("resolve", str(path))
    assert done.returncode == 0, done.stderr
    assert torch_of(tmp_path, "v100").version == "2.14.1+cu126"
    meta = load_lock(tmp_path / "locks" / "v100.conda-lock.yml").metadata.custom_metadata
    assert meta["lockgen.torch-index.linux-64"] == f"torch @ {pytorch}/mirror/whl/cu126"
    moved = path.read_text().replace('torch-variants = ["cu126"]', "")
    path.write_text(moved)
    stale = run_cli("resolve", str(path), "--check")
    assert stale.returncode == 1 and "v100: spec-changed" in stale.stdout


def test_a_source_that_cannot_be_reached_refuses_the_target_naming_it(tmp_path: Path, indexes) -> None:
    pypi, _, _ = indexes
    closed = RangeServer(Site())
    url = closed.url
    closed.stop()
    path = stack(tmp_path, pypi, f'torch-indexes = {{ cu126 = "{url}/whl/cu126" }}')
    done = run_cli("resolve", str(path))
    assert done.returncode == 1, done.stderr
    assert f"error: target `v100` on linux-64: its torch source cu126 @ {url}/whl/cu126 cannot be read" in done.stderr
    assert "hint: make it reachable, point [pypi-options] torch-indexes.cu126 or torch-mirror" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "locks").exists()


@pytest.mark.slow
def test_a_gh200_takes_pytorchs_aarch64_build_judged_with_its_published_list(tmp_path: Path, indexes) -> None:
    """download.pytorch.org's aarch64 cu126 list is RELEASE.md's (`8.0;9.0` for 2.12-2.14, the aarch64 CI script's):
    a GH200 (sm90) takes 2.14.1+cu126 from it; without that list the build decided nothing (arch-list-unknown)."""
    pypi, pytorch, _ = indexes
    path = stack(
        tmp_path,
        pypi,
        f'torch-indexes = {{ cu126 = "{pytorch}/simple" }}',
        targets='[targets.gh200]\narch = "sm90"\ndriver = "575.57.08"\nplatforms = ["linux-aarch64"]\n',
    )
    done = run_cli("explain", str(path), "--target", "gh200", "--json")
    assert done.returncode == 0, done.stderr
    mine = [c for c in json.loads(done.stdout)["candidates"] if c["source"] == f"{pytorch}/simple"]
    assert [(c["release"], c["variant"], c["admitted"]) for c in mine] == [("2.14", "cu126", True)]
    assert "8.0;9.0" in mine[0]["reason"], mine[0]
    done = run_cli("resolve", str(path))
    assert done.returncode == 0, done.stderr
    locked = {p.name: p.version for p in load_lock(tmp_path / "locks" / "gh200.conda-lock.yml").package}
    assert locked["torch"] == "2.14.1+cu126"


def test_explain_lists_each_sources_candidates_with_verdicts(tmp_path: Path, indexes) -> None:
    pypi, pytorch, _ = indexes
    path = stack(tmp_path, pypi, f'torch-indexes = {{ cu126 = "{pytorch}/simple" }}')
    done = run_cli("explain", str(path), "--target", "v100", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["newest_admitted"] == {"linux-64": f"torch 2.14 (cu126, {pytorch}/simple)"}
    by_source = {(c["release"], c["source"]): (c["admitted"], c["rule"]) for c in report["candidates"]}
    assert by_source[("2.14", f"{pytorch}/simple")] == (True, "native-kernels")
    assert by_source[("2.14", "pypi.org")] == (False, "driver-floor")
    assert by_source[("2.10", "pypi.org")] == (True, "native-kernels")
    text = run_cli("explain", str(path), "--target", "v100")
    assert f"admitted torch 2.14 cu126 {pytorch}/simple linux-64  [native-kernels]" in text.stdout


@pytest.mark.parametrize(
    "options, said",
    [
        ('torch-variants = ["cu12"]', "`cu12` is not a CUDA variant"),
        ('torch-variants = ["cu126", "cu126"]', "names a variant twice"),
        ('torch-mirror = "ftp://mirror/whl"', "torch-mirror `ftp://mirror/whl` must be an http(s) or file URL"),
        ('torch-indexes = { rocm63 = "https://example.org/whl/rocm6.3" }', "`rocm63` is not a variant"),
    ],
)
def test_bad_torch_sources_are_one_error_with_a_hint(tmp_path: Path, options: str, said: str) -> None:
    path = stack(tmp_path, "https://pypi.org", options)
    done = run_cli("resolve", str(path))
    assert done.returncode == 1 and said in done.stderr and "hint:" in done.stderr and "Traceback" not in done.stderr


def test_a_pep503_html_index_as_download_pytorch_org_serves_is_read_too(tmp_path: Path, indexes) -> None:
    """PyTorch's own indexes answer in HTML only: the anchors' file names and `#sha256=` are what counts, and
    under a cut-off a file without an upload time is kept out, as uv keeps it out."""
    pypi, pytorch, site = indexes
    files = json.loads(site.files["/simple/torch/"][0])["files"]
    anchors = "".join(f'<a href="{f["url"]}#sha256={f["hashes"]["sha256"]}">{f["filename"]}</a><br/>' for f in files)
    site.files["/simple/torch/"] = (f"<!DOCTYPE html><html><body>{anchors}</body></html>".encode(), "text/html")
    path = stack(
        tmp_path,
        pypi,
        f'torch-indexes = {{ cu126 = "{pytorch}/simple" }}',
        targets='[targets.v100]\narch = "sm70"\ndriver = "575.57.08"\n',
    )
    done = run_cli("resolve", str(path))
    assert done.returncode == 0, done.stderr
    assert torch_of(tmp_path, "v100").version == "2.14.1+cu126"
    cut = run_cli("explain", str(path), "--target", "v100", "--json")
    assert any(c["source"] == f"{pytorch}/simple" for c in json.loads(cut.stdout)["candidates"])
    path.write_text(path.read_text().replace("[pypi-options]\n", '[pypi-options]\nexclude-newer = "2026-06-01"\n'))
    dated = json.loads(run_cli("explain", str(path), "--target", "v100", "--json").stdout)
    mine = [c for c in dated["candidates"] if c["source"] == f"{pytorch}/simple"]
    assert [(c["release"], c["admitted"], c["rule"]) for c in mine] == [
        ("2.14", False, "exclude-newer"),
        ("2.13", False, "exclude-newer"),
    ]
    assert "no 2.14.1+cu126 wheel uploaded before the cut-off (2026-06-01;" in mine[0]["reason"]


@pytest.mark.parametrize(
    "change, rule, said",
    [
        (('python = "3.11"', 'python = "3.12"'), "python", "no 2.14.1+cu126 wheel for Python 3.12 on the platform"),
        (
            ('driver = "575.57.08"', 'driver = "575.57.08"\nglibc = "2.17"'),
            "glibc",
            "needs glibc >= 2.28, the target states 2.17",
        ),
    ],
)
def test_python_and_glibc_decide_a_sources_candidates_too(
    tmp_path: Path, indexes, change, rule: str, said: str
) -> None:
    pypi, pytorch, _ = indexes
    path = stack(
        tmp_path,
        pypi,
        f'torch-indexes = {{ cu126 = "{pytorch}/simple" }}',
        targets='[targets.v100]\narch = "sm70"\ndriver = "575.57.08"\n',
    )
    path.write_text(path.read_text().replace(*change))
    done = run_cli("explain", str(path), "--target", "v100", "--json")
    assert done.returncode == 0, done.stderr
    newest = next(c for c in json.loads(done.stdout)["candidates"] if c["source"] == f"{pytorch}/simple")
    assert (newest["release"], newest["admitted"], newest["rule"]) == ("2.14", False, rule) and said in newest["reason"]


FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FUZZ
@given(data=st.data())
def test_any_index_page_or_source_setting_gives_candidates_or_one_error(
    tmp_path: Path, indexes, data: st.DataObject
) -> None:
    """A damaged HTML page (cut, spliced with random text or attributes) and any torch-variants / torch-mirror
    value through explain: it works, or it is a LockgenError with a one-line message and a hint."""
    from lockgen.api.explain import explain

    pypi, pytorch, site = indexes
    files = json.loads(site.files["/simple/torch/"][0])["files"] if "json" in site.files["/simple/torch/"][1] else []
    page = "".join(f'<a href="{f["url"]}#sha256={f["hashes"]["sha256"]}">{f["filename"]}</a>' for f in files) or "<a>"
    cut = data.draw(st.integers(0, len(page)))
    noise = data.draw(
        st.text(alphabet=st.sampled_from('<>"=#a href data-yanked sha256 torch-2.14.1+cu126.whl \x00é'), max_size=40)
    )
    site.files["/html/torch/"] = ((page[:cut] + noise + page[cut:]).encode("utf-8", "surrogatepass"), "text/html")
    variants = data.draw(st.sampled_from(['["cu126"]', '["cu126", "cu130"]', "[]", '["cu1x6"]', '"cu126"', "[1]"]))
    mirror = data.draw(st.sampled_from([f'"{pytorch}"', '""', '"ftp://x"', "3", f'"{pytorch}/missing"']))
    folder = tmp_path / f"f{data.draw(st.integers(0, 10**9))}"
    path = stack(
        folder,
        pypi,
        f'torch-indexes = {{ cu126 = "{pytorch}/html" }}\ntorch-variants = {variants}\ntorch-mirror = {mirror}',
        targets='[targets.v100]\narch = "sm70"\ndriver = "575.57.08"\n',
    )
    try:
        report = explain(path, "v100")
    except LockgenError as exc:
        assert exc.message and "\n" not in exc.message and exc.hint
    else:
        assert all(c["rule"] for c in report["candidates"])


def test_a_file_index_folder_is_read_under_the_file_roots_as_an_air_gapped_mirror_is(tmp_path: Path, indexes) -> None:
    """`torch-indexes.cu126 = "file:///mirror/whl/cu126"`: a PEP 503 folder (`torch/index.html`, the layout uv
    reads) is read at resolve time like an http index, only under $LOCKGEN_FILE_ROOTS, and torch is routed to it."""
    from tests.wheel_index import build_index

    pypi, _, _ = indexes
    mirror = build_index(tmp_path / "mirror" / "whl" / "cu126", CU126)
    folder = (mirror / "simple").as_uri()
    path = stack(
        tmp_path / "s",
        pypi,
        f'torch-indexes = {{ cu126 = "{folder}" }}',
        targets='[targets.v100]\narch = "sm70"\ndriver = "575.57.08"\n',
    )
    outside = run_cli("resolve", str(path), env={"LOCKGEN_FILE_ROOTS": str(tmp_path / "s")})
    assert (
        outside.returncode == 1
        and "its torch source cu126 @ " in outside.stderr
        and "outside the folders" in outside.stderr
    )
    assert "hint: " in outside.stderr and "Traceback" not in outside.stderr and not (tmp_path / "s" / "locks").exists()
    done = run_cli("resolve", str(path), env={"LOCKGEN_FILE_ROOTS": str(tmp_path / "mirror")})
    assert done.returncode == 0, done.stderr
    torch = torch_of(path.parent, "v100")
    assert torch.version == "2.14.1+cu126" and torch.url.startswith((mirror / "files").as_uri())
    meta = load_lock(path.parent / "locks" / "v100.conda-lock.yml").metadata.custom_metadata
    assert meta["lockgen.torch-index.linux-64"] == f"torch @ {folder}"
    report = json.loads(
        run_cli(
            "explain", str(path), "--target", "v100", "--json", env={"LOCKGEN_FILE_ROOTS": str(tmp_path / "mirror")}
        ).stdout
    )
    assert ("2.14", folder, True) in [(c["release"], c["source"], c["admitted"]) for c in report["candidates"]]
    (mirror / "simple" / "torch" / "index.html").write_text(
        f'<a href="https://elsewhere.example/torch-2.14.1+cu126-{X86}.whl">x</a>'
    )
    escaped = run_cli("explain", str(path), "--target", "v100", env={"LOCKGEN_FILE_ROOTS": str(tmp_path / "mirror")})
    assert escaped.returncode == 1 and "outside the folder" in escaped.stderr and "Traceback" not in escaped.stderr


@FUZZ
@given(data=st.data())
def test_any_local_index_page_gives_candidates_or_one_error(tmp_path: Path, indexes, data: st.DataObject) -> None:
    """A local index folder's page, HTML or PEP 691 JSON, damaged or linking anywhere: explain works, or it is a
    LockgenError with a one-line message and a hint."""
    from lockgen.api.explain import explain

    pypi, _, _ = indexes
    folder = Path(tempfile.mkdtemp(dir=tmp_path)) / "torch"
    folder.mkdir()
    name = data.draw(st.sampled_from(["index.html", "index.v1_json"]))
    href = data.draw(
        st.sampled_from(
            [
                f"torch-2.14.1+cu126-{X86}.whl",
                f"/etc/torch-2.14.1+cu126-{X86}.whl",
                f"http://127.0.0.1:1/torch-2.14.1+cu126-{X86}.whl",
                "../../../x.whl",
            ]
        )
    )
    text = data.draw(
        st.sampled_from(
            [
                f'<a href="{href}">t</a>',
                json.dumps(
                    {"files": [{"filename": href.rsplit("/")[-1], "url": href, "hashes": {"sha256": "a" * 64}}]}
                ),
            ]
        )
    )
    noise = data.draw(st.text(max_size=30))
    (folder / name).write_text(
        text[: data.draw(st.integers(0, len(text)))] + noise, encoding="utf-8", errors="surrogatepass"
    )
    path = stack(
        folder.parent,
        pypi,
        f'torch-indexes = {{ cu126 = "{folder.parent.as_uri()}" }}',
        targets='[targets.v100]\narch = "sm70"\ndriver = "575.57.08"\n',
    )
    try:
        report = explain(path, "v100")
    except LockgenError as exc:
        assert exc.message and "\n" not in exc.message and exc.hint
    else:
        assert all(c["rule"] for c in report["candidates"])
