"""torch releases newer than the facts, offline: a PEP 691 index of test wheels on loopback whose torch
releases carry their CUDA in their requirements, as PyPI's do (`cuda-toolkit[...]==13.0.3`)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from lockgen.adapters.lock.lockfile_yaml import load_lock
from tests.conftest import run_cli
from tests.range_server import RangeServer, Site
from tests.wheel_index import Wheel, build_wheel

TAG = "cp311-cp311-manylinux_2_28_x86_64"
LINUX = '; platform_system == "Linux"'
TORCH = [  # the facts know torch up to 2.15 on PyPI
    Wheel("torch", "2.14.0", tag=TAG, requires=("cuda-toolkit[cudart]==13.0.3" + LINUX,)),
    Wheel("torch", "2.16.0", tag=TAG, requires=("cuda-toolkit[cudart]==13.0.3" + LINUX, "filelock")),
    Wheel("torch", "2.16.0rc1", tag=TAG, requires=("cuda-toolkit==13.0.3",)),  # a pre-release is never evidence
    Wheel("torch", "2.17.0", tag=TAG, requires=("cuda-toolkit[cudart]==13.9.1" + LINUX,)),  # a CUDA no fact knows
]
OTHERS = [Wheel("cuda-toolkit", "13.0.3"), Wheel("cuda-toolkit", "13.9.1"), Wheel("filelock", "3.0.0")]
UPLOADED = {
    "2.14.0": "2026-09-02T13:44:10Z",
    "2.16.0rc1": "2026-10-20T10:00:00Z",
    "2.16.0": "2026-11-10T15:17:10Z",
    "2.17.0": "2026-11-20T09:00:00Z",
    "2.18.0": "2026-11-25T09:00:00Z",
}


def publish(site: Site, folder: Path, wheels: list[Wheel], root: str = "/simple") -> None:
    """Writes every project's PEP 691 page (with PEP 700 upload times) under `root` and its wheel files into `site`."""
    pages: dict[str, list[dict]] = {}
    folder.mkdir(parents=True, exist_ok=True)
    for wheel in wheels:
        path = build_wheel(wheel, folder)
        data = path.read_bytes()
        site.files[f"/files/{path.name}"] = (data, "application/octet-stream")
        pages.setdefault(wheel.name, []).append(
            {
                "filename": path.name,
                "url": f"../../files/{path.name}",
                "hashes": {"sha256": hashlib.sha256(data).hexdigest()},
                "size": len(data),
                "upload-time": UPLOADED.get(wheel.version, "2026-01-01T00:00:00Z"),
            }
        )
    for name, files in pages.items():
        body = json.dumps({"meta": {"api-version": "1.1"}, "name": name, "files": files}).encode()
        site.files[f"{root}/{name}/"] = (body, "application/vnd.pypi.simple.v1+json")


@pytest.fixture
def index(tmp_path: Path):
    site = Site()
    publish(site, tmp_path / "wheels", TORCH + OTHERS)
    server = RangeServer(site)
    yield server, site
    server.stop()


def stack(folder: Path, url: str, extra: str = "", options: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "stack.toml"
    path.write_text(
        f'[stack]\nname = "newer"\npython = "3.11"\n{extra}\n[pypi-dependencies]\ntorch = ">=2.4"\n'
        f'[pypi-options]\nindex-url = "{url}/simple"\n{options}\n'
        '[targets.h100]\narch = "sm90"\ndriver = "580.95.05"\n'
    )  # CUDA 13.0 Update 2's driver
    return path


def torch_of(lock_path: Path) -> str:
    return next(p.version for p in load_lock(lock_path).package if p.name == "torch")


def resolved_torch(folder: Path, url: str, **stack_options: str) -> tuple[str, str]:
    """(resolve's stderr, the torch it locked) for a stack in `folder`; the resolve must succeed."""
    path = stack(folder, url, **stack_options)
    done = run_cli("resolve", str(path))
    assert done.returncode == 0, done.stderr
    return done.stderr, torch_of(path.parent / "locks" / "h100.conda-lock.yml")


@pytest.mark.slow
def test_a_release_newer_than_the_facts_is_admitted_on_its_metadata(tmp_path: Path, index) -> None:
    server, _ = index
    path = stack(tmp_path / "a", server.url)
    done = run_cli("resolve", str(path))
    assert done.returncode == 0, done.stderr
    lock_path = path.parent / "locks" / "h100.conda-lock.yml"
    assert torch_of(lock_path) == "2.16.0"
    admitted = (
        "torch 2.16.0 is newer than lockgen's facts (2.15 on linux-64); admitted from its metadata: CUDA 13.0 "
        "(`cuda-toolkit==13.0.3`), arch list of 2.14 cu130 (inferred)"
    )
    refused = "torch 2.17.0 is newer than lockgen's facts (2.15 on linux-64); refused: it is built with CUDA 13.9"
    assert admitted in done.stderr and refused in done.stderr and "2.16.0rc1" not in done.stderr
    meta = load_lock(lock_path).metadata.custom_metadata
    assert admitted in meta["lockgen.newer-releases.linux-64"] and refused in meta["lockgen.newer-releases.linux-64"]
    assert meta["lockgen.unknown-releases"] == "infer"
    assert "!=2.17.*" in meta["lockgen.pypi-constraints.linux-64"]
    # the same inputs give the same bytes, in another folder
    again = stack(tmp_path / "b", server.url)
    assert run_cli("resolve", str(again)).returncode == 0
    assert (again.parent / "locks" / "h100.conda-lock.yml").read_bytes() == lock_path.read_bytes()


@pytest.mark.slow
def test_the_refuse_policy_keeps_every_newer_release_out_and_says_so(tmp_path: Path, index) -> None:
    server, _ = index
    stderr, torch = resolved_torch(tmp_path, server.url, extra='unknown-releases = "refuse"')
    assert torch == "2.14.0"
    assert (
        "torch 2.16.0 is newer than lockgen's facts (2.15 on linux-64); refused: the stack says "
        'unknown-releases = "refuse"' in stderr
    )
    bad = stack(tmp_path / "bad", server.url, extra='unknown-releases = "maybe"')
    refused = run_cli("resolve", str(bad))
    assert refused.returncode == 1 and "unknown-releases" in refused.stderr and "Traceback" not in refused.stderr


@pytest.mark.slow
def test_exclude_newer_hides_a_release_from_the_evidence_too(tmp_path: Path, index) -> None:
    server, _ = index
    stderr, torch = resolved_torch(tmp_path, server.url, options='exclude-newer = "2026-10-01"')
    assert torch == "2.14.0" and "newer than lockgen's facts" not in stderr


@pytest.mark.slow
def test_check_reports_a_release_published_after_the_lock(tmp_path: Path, index) -> None:
    server, site = index
    path = stack(tmp_path, server.url)
    assert run_cli("resolve", str(path)).returncode == 0
    fresh = run_cli("resolve", str(path), "--check")
    assert fresh.returncode == 0 and fresh.stdout == "", fresh.stdout
    publish(
        site,
        tmp_path / "later",
        TORCH + OTHERS + [Wheel("torch", "2.18.0", tag=TAG, requires=("cuda-toolkit==13.0.3",))],
    )
    stale = run_cli("resolve", str(path), "--check")
    assert stale.returncode == 1, stale.stdout
    assert "h100: facts-changed: " in stale.stdout and "(now admitted: 2.18)" in stale.stdout
    assert "torch 2.18.0 is newer than lockgen's facts" in stale.stdout


@pytest.mark.slow
def test_an_index_answering_pep503_html_is_read_as_resolve_and_explain_read_any_source(tmp_path: Path, index) -> None:
    """A PEP 503 page without hashes, upload times or metadata files (a plain mirror): its releases are the
    candidates, and a release newer than the facts is judged on the METADATA read from the wheel by ranges."""
    server, site = index
    body, _ = site.files["/simple/torch/"]
    names = [f["filename"] for f in json.loads(body)["files"]]
    site.files["/simple/torch/"] = ("".join(f'<a href="../../files/{n}">{n}</a>' for n in names).encode(), "text/html")
    path = stack(tmp_path, server.url)
    done = run_cli("resolve", str(path))
    assert done.returncode == 0, done.stderr
    assert torch_of(path.parent / "locks" / "h100.conda-lock.yml") == "2.16.0"
    assert any(r is not None and r.startswith("bytes=") for p, r, _ in site.log if p.endswith("2.16.0-" + TAG + ".whl"))
    report = json.loads(run_cli("explain", str(path), "--target", "h100", "--json").stdout)
    assert [(c["release"], c["admitted"], c["rule"]) for c in report["candidates"]] == [
        ("2.16", True, "native-kernels"),
        ("2.14", True, "native-kernels"),
    ]  # only what the index serves
    site.files["/simple/torch/"] = (b"<html>nothing here</html>", "text/html")
    empty = run_cli("resolve", str(stack(tmp_path / "empty", server.url)))
    assert empty.returncode == 1 and "no torch release on PyPI fits sm90" in empty.stderr
    assert "hint: the stack's index serves no torch build the facts know" in empty.stderr


@pytest.mark.slow
def test_facts_check_lists_what_the_index_has_and_the_facts_lack(tmp_path: Path, index) -> None:
    server, _ = index
    done = run_cli(
        "facts", "check", "--index", f"{server.url}/simple", "--platform", "linux-64", "--python", "3.11", "--json"
    )
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert [(r["torch"], r["cuda"], r["admitted"]) for r in report["newer_releases"]] == [
        ("2.16.0", "13.0", True),
        ("2.17.0", "13.9", False),
    ]
    assert [t["cuda"] for t in report["unknown_cuda_toolkits"]] == ["13.9"]
    summary = run_cli("facts", "--json")
    assert summary.returncode == 0 and json.loads(summary.stdout)["origin"] == "lockgen/data/gpu_facts.json"


@pytest.mark.slow
def test_lockgen_facts_points_at_a_newer_file(tmp_path: Path, index) -> None:
    from lockgen.core.gpu.package_data import load_json

    server, _ = index
    newer = load_json("gpu_facts.json") | {"valid_as_of": "2099-01-01"}
    newer["pytorch_pypi_wheels"] = newer["pytorch_pypi_wheels"] + [
        {
            "torch": "2.17",
            "platform": "linux-64",
            "variant": "cu139",
            "arch_list": "9.0",
            "inferred": False,
            "sources": ["a test"],
        }
    ]
    newer["cuda_toolkits"] = newer["cuda_toolkits"] | {"13.9": {"min_driver": "580.65.06", "sources": ["a test"]}}
    facts_file = tmp_path / "facts.json"
    facts_file.write_text(json.dumps(newer))
    env = {"LOCKGEN_FACTS": str(facts_file)}
    path = stack(tmp_path / "s", server.url)
    done = run_cli("resolve", str(path), env=env)
    assert done.returncode == 0, done.stderr
    assert torch_of(path.parent / "locks" / "h100.conda-lock.yml") == "2.17.0"
    meta = load_lock(path.parent / "locks" / "h100.conda-lock.yml").metadata.custom_metadata
    assert meta["lockgen.facts-valid-as-of"] == "2099-01-01"
    facts_file.write_text('{"archs": 3}')
    broken = run_cli("facts", env=env)
    assert (
        broken.returncode == 1
        and "does not follow the facts schema" in broken.stderr
        and "Traceback" not in broken.stderr
    )


# PyTorch's cu130 index the day 2.16 is published (made-up wheels): 2.14.0+cu130 the facts list, 2.16.0+cu130 and a
# 2.16.0+cu136 build whose CUDA has no driver floor in the facts
VARIANT = [
    Wheel("torch", "2.14.0+cu130", tag=TAG, requires=("cuda-toolkit[cudart]==13.0.3" + LINUX,)),
    Wheel("torch", "2.16.0+cu130", tag=TAG, requires=("cuda-toolkit[cudart]==13.0.3" + LINUX,)),
    Wheel("torch", "2.16.0+cu136", tag=TAG, requires=("cuda-toolkit[cudart]==13.6.0" + LINUX,)),
]


@pytest.mark.slow
def test_facts_check_names_a_new_release_and_its_cuda_variants_the_day_it_is_published(tmp_path: Path, index) -> None:
    """torch 2.16 (scheduled 2026-12-22) on a PyTorch variant index: facts check names each CUDA variant build with
    the CUDA its tag names and the arch list resolve would judge it by; resolve admits 2.16.0+cu130 on that
    evidence (explain, which is resolve's record, admits it from that index), with no change to the facts or the
    code."""
    server, site = index
    publish(site, tmp_path / "variant", VARIANT, root="/whl/cu130")
    done = run_cli(
        "facts", "check", "--index", f"{server.url}/whl/cu130", "--platform", "linux-64", "--python", "3.11", "--json"
    )
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert [(b["torch"], b["cuda"], b["admitted"], b["arch_list"]) for b in report["variant_builds"]] == [
        ("2.16.0+cu130", "13.0", True, "7.5;8.0;8.6;9.0;10.0;12.0"),
        ("2.16.0+cu136", "13.6", False, None),
    ]
    assert "inferred: the list of 2.14 cu130 on linux-64" in report["variant_builds"][0]["decision"]
    assert [t["cuda"] for t in report["unknown_cuda_toolkits"]] == ["13.6"]
    said = run_cli("facts", "check", "--index", f"{server.url}/whl/cu130", "--platform", "linux-64", "--python", "3.11")
    assert (
        "linux-64: torch 2.16.0+cu130 (" in said.stdout
        and "admitted with arch list 7.5;8.0;8.6;9.0;10.0;12.0" in said.stdout
    )
    # a stack that takes torch from that index: facts check --stack reads it too, and explain (resolve's record) admits
    # 2.16.0+cu130
    path = stack(tmp_path / "s", server.url, options=f'torch-indexes = {{ cu130 = "{server.url}/whl/cu130" }}')
    checked = json.loads(run_cli("facts", "check", "--stack", str(path), "--json").stdout)
    assert [(b["torch"], b["admitted"]) for b in checked["variant_builds"]] == [
        ("2.16.0+cu130", True)
    ]  # the index's own variant
    assert [r["torch"] for r in checked["newer_releases"]] == ["2.16.0", "2.17.0"]  # PyPI's, as before
    report = json.loads(run_cli("explain", str(path), "--target", "h100", "--json").stdout)
    from_index = [
        (c["release"], c["admitted"], c["rule"]) for c in report["candidates"] if c["source"].endswith("/whl/cu130")
    ]
    assert from_index == [("2.16", True, "native-kernels"), ("2.14", True, "native-kernels")], report["candidates"]
