"""The example stack on the real conda-forge subset: per-target choices, byte stability, check, update, diff,
render, conda-lock interop, and the HTTP path."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from lockgen.api import resolve as api
from lockgen.adapters.lock.lockfile_yaml import load_lock
from lockgen.errors import UserError
from tests.conftest import EXAMPLE_STACK, SNAPSHOT, run_cli, shared_dir

TARGETS = ("a100", "h100", "b200", "gh200", "cpu")


def alias(snapshot: Path) -> list[str]:
    return [f"conda-forge={snapshot}"]


def pick(lock_path: Path, name: str) -> tuple[str, str]:
    package = next(p for p in load_lock(lock_path).package if p.name == name)
    return package.version, package.build or ""


@pytest.fixture(scope="module")
def resolved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("example") / "pytorch-cuda"
    shutil.copytree(EXAMPLE_STACK.parent, folder, ignore=shutil.ignore_patterns("locks"))
    api.resolve(folder / "stack.toml", aliases=alias(SNAPSHOT))
    return folder / "locks"


def test_the_committed_snapshot_is_the_shared_one_byte_for_byte() -> None:
    """The repository's copy (envs/examples/conda-forge-snapshot) stands in for ../shared's; a local channel's
    index digest is its file's sha256, so the two must not drift apart."""
    shared = shared_dir() / "snapshots" / "public-locks"
    for name in (
        "linux-64/repodata.json",
        "linux-aarch64/repodata.json",
        "noarch/repodata.json",
        "snapshot-report.json",
    ):
        assert (SNAPSHOT / name).read_bytes() == (shared / name).read_bytes(), name


@pytest.mark.slow
def test_the_committed_example_locks_are_fresh_against_the_committed_snapshot() -> None:
    result = run_cli("resolve", str(EXAMPLE_STACK), "--check", "--channel-alias", f"conda-forge={SNAPSHOT}")
    assert result.returncode == 0, result.stderr


def test_every_target_gets_the_right_cuda_build(resolved: Path) -> None:
    b200 = pick(resolved / "b200.conda-lock.yml", "pytorch")
    assert b200[1].startswith(("cuda128", "cuda129", "cuda13"))
    assert pick(resolved / "cpu.conda-lock.yml", "pytorch")[1].startswith("cpu")
    gh200 = load_lock(resolved / "gh200.conda-lock.yml")
    assert gh200.metadata.platforms == ("linux-aarch64",)
    assert pick(resolved / "gh200.conda-lock.yml", "pytorch")[1].startswith("cuda")
    a100_cuda = pick(resolved / "a100.conda-lock.yml", "cuda-version")[0]
    assert tuple(int(x) for x in a100_cuda.split(".")) <= (12, 4)
    assert not any(p.name == "cuda-version" for p in load_lock(resolved / "cpu.conda-lock.yml").package)


def test_lock_urls_point_at_the_real_channels(resolved: Path) -> None:
    urls = {p.url.split("/")[3] for p in load_lock(resolved / "a100.conda-lock.yml").package}
    assert urls <= {"conda-forge", "pytorch", "nvidia"} and "file:" not in str(urls)


def test_committed_example_locks_are_what_resolve_writes(resolved: Path) -> None:
    for target in TARGETS:
        committed = EXAMPLE_STACK.parent / "locks" / f"{target}.conda-lock.yml"
        assert committed.read_bytes() == (resolved / committed.name).read_bytes(), target


def test_resolving_twice_in_two_folders_gives_the_same_bytes(tmp_path: Path, snapshot: Path, resolved: Path) -> None:
    other = tmp_path / "elsewhere" / "stack-copy"
    shutil.copytree(EXAMPLE_STACK.parent, other, ignore=shutil.ignore_patterns("locks"))
    api.resolve(other / "stack.toml", aliases=alias(snapshot))
    for target in TARGETS:
        name = f"{target}.conda-lock.yml"
        assert (other / "locks" / name).read_bytes() == (resolved / name).read_bytes()


def _imported(result: subprocess.CompletedProcess[str]) -> set[str]:
    """The modules a run under PYTHONPROFILEIMPORTTIME=1 imported, by name."""
    return {line.split("|")[-1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")}


@pytest.mark.slow
def test_a_repeated_resolve_builds_no_pydantic_validator(example_copy: Path, snapshot: Path, tmp_path: Path) -> None:
    """A resolve whose stack and facts are kept validates nothing with pydantic (issue 43 item 4): the plan's
    records (windows, candidates, verdicts, requests) are dataclasses, the lock is built from values its models hold
    already and the target digested from its fields. A validator's first build imports pydantic's plugin loader (and
    `importlib.metadata`): the first resolve, which validates the stack, shows that the probe sees one."""
    line = ("resolve", str(example_copy), "--channel-alias", f"conda-forge={snapshot}")
    env = {"LOCKGEN_HOME": str(tmp_path / "home"), "PYTHONPROFILEIMPORTTIME": "1"}
    first, again = run_cli(*line, env=env), run_cli(*line, env=env)
    assert first.returncode == again.returncode == 0, first.stderr + again.stderr
    assert "unchanged" in again.stderr
    assert "pydantic.plugin._loader" in _imported(first)
    assert "pydantic.plugin._loader" not in _imported(again)


@pytest.mark.slow
def test_a_repeated_resolve_imports_no_pydantic(example_copy: Path, snapshot: Path, tmp_path: Path) -> None:
    """A resolve whose stack and facts are kept imports neither pydantic nor lockgen's pydantic base (issue 43 item
    4): the spec and the GPU facts are plain records past their boundary (`spec_parse`, `core.gpu.facts`), kept as
    JSON documents and rebuilt without a validator, as the lock is. The first resolve, which validates the stack and
    the facts, shows that the probe sees the import; the second writes the same lock bytes."""
    line = ("resolve", str(example_copy), "--channel-alias", f"conda-forge={snapshot}")
    env = {"LOCKGEN_HOME": str(tmp_path / "home"), "PYTHONPROFILEIMPORTTIME": "1"}
    first = run_cli(*line, env=env)
    locks = {lock.name: lock.read_bytes() for lock in example_copy.parent.glob("locks/*.conda-lock.yml")}
    again = run_cli(*line, env=env)
    assert first.returncode == again.returncode == 0, first.stderr + again.stderr
    assert "unchanged" in again.stderr and locks
    assert {"pydantic", "lockgen.model.base"} <= _imported(first)
    imported = _imported(again)
    assert "pydantic" not in imported and "lockgen.model.base" not in imported, sorted(
        name for name in imported if name.startswith(("pydantic", "lockgen.model.base", "lockgen.model.checked"))
    )
    assert {lock.name: lock.read_bytes() for lock in example_copy.parent.glob("locks/*.conda-lock.yml")} == locks


@pytest.mark.slow
def test_conda_lock_parses_every_lock(resolved: Path) -> None:
    from conda_lock.lockfile import parse_conda_lock_file

    for target in TARGETS:
        lock = parse_conda_lock_file(resolved / f"{target}.conda-lock.yml")
        ours = load_lock(resolved / f"{target}.conda-lock.yml")
        assert len(lock.package) == len(ours.package)
        assert {(p.name, p.version) for p in lock.package} == {(p.name, p.version) for p in ours.package}


@pytest.mark.slow
def test_check_fresh_then_stale_for_each_reason(example_copy: Path, snapshot: Path) -> None:
    flags = ["--channel-alias", f"conda-forge={snapshot}"]
    missing = run_cli("resolve", str(example_copy), "--check", *flags)
    assert missing.returncode == 1 and "a100: target-missing" in missing.stdout
    assert run_cli("resolve", str(example_copy), *flags).returncode == 0
    fresh = run_cli("resolve", str(example_copy), "--check", *flags)
    assert fresh.returncode == 0 and fresh.stdout == ""
    text = example_copy.read_text()
    cases = {  # each reason names what changed
        ("spec-changed", "(pytorch: >=2.4 -> >=2.5)"): text.replace('pytorch = ">=2.4"', 'pytorch = ">=2.5"'),
        ("spec-changed", "(numpy added: *)"): text.replace('pytorch = ">=2.4"', 'pytorch = ">=2.4"\nnumpy = "*"'),
        ("target-changed", "(driver: 550.54.15 -> 550.90.07)"): text.replace(
            'driver = "550.54.15"', 'driver = "550.90.07"'
        ),
        ("exclude-newer-changed", "(exclude-newer: (none) -> 2026-01-01)"): text.replace(
            'platforms = ["linux-64"]', 'platforms = ["linux-64"]\nexclude-newer = "2026-01-01"'
        ),
    }
    for (kind, named), changed in cases.items():
        example_copy.write_text(changed)
        stale = run_cli("resolve", str(example_copy), "--check", *flags)
        assert stale.returncode == 1 and f": {kind}: " in stale.stdout and named in stale.stdout, (
            kind,
            stale.stdout,
            stale.stderr,
        )
    example_copy.write_text(text)
    mirror = example_copy.parent / "mirror"
    shutil.copytree(snapshot, mirror)
    index = mirror / "noarch" / "repodata.json"
    index.write_text(index.read_text().replace('"license": "MIT"', '"license": "MIT-0"', 1))
    changed = run_cli("resolve", str(example_copy), "--check", "--channel-alias", f"conda-forge={mirror}")
    assert changed.returncode == 1 and ": channel-index-changed:" in changed.stdout


def test_update_changes_only_the_named_package(example_copy: Path, snapshot: Path) -> None:
    flags = alias(snapshot)
    lock_path = example_copy.parent / "locks" / "h100.conda-lock.yml"
    text = example_copy.read_text()
    example_copy.write_text(
        text.replace('platforms = ["linux-64"]', 'platforms = ["linux-64"]\nexclude-newer = "2026-01-01"')
    )
    api.resolve(example_copy, targets=["h100"], aliases=flags)
    before = {p.name: p.version for p in load_lock(lock_path).package}
    example_copy.write_text(text)
    api.resolve(example_copy, targets=["h100"], updates=["ca-certificates"], aliases=flags)
    after = {p.name: p.version for p in load_lock(lock_path).package}
    assert {n for n in before if before[n] != after.get(n)} == {"ca-certificates"}
    assert after["ca-certificates"] > before["ca-certificates"]
    api.resolve(example_copy, targets=["h100"], updates=["pytorch"], aliases=flags)  # held python 3.12: 2.8.0 stays
    assert {p.name: p.version for p in load_lock(lock_path).package} == after
    with pytest.raises(UserError, match="not in the lock"):
        api.resolve(example_copy, targets=["h100"], updates=["no-such-package"], aliases=flags)


@pytest.mark.slow
def test_diff_lists_the_cuda_stack_first(resolved: Path) -> None:
    result = run_cli("diff", str(resolved / "a100.conda-lock.yml"), str(resolved / "h100.conda-lock.yml"))
    assert result.returncode == 1  # they differ, as diff(1) says it
    assert (
        run_cli(
            "diff", str(resolved / "a100.conda-lock.yml"), str(resolved / "h100.conda-lock.yml"), "--exit-zero"
        ).returncode
        == 0
    )
    lines = result.stdout.splitlines()
    assert any(line.startswith("~ linux-64 pytorch 2.5.1") for line in lines)
    first_plain = next(
        i
        for i, line in enumerate(lines)
        if not line.split()[2].startswith(
            ("cuda", "libcu", "libnv", "nccl", "cudnn", "pytorch", "libtorch", "torch", "nvidia", "triton")
        )
    )
    assert all(not line.split()[2].startswith(("cuda-", "pytorch")) for line in lines[first_plain:])
    same = run_cli("diff", str(resolved / "a100.conda-lock.yml"), str(resolved / "a100.conda-lock.yml"))
    assert same.returncode == 0 and same.stdout == ""


@pytest.mark.slow
def test_render_explicit(resolved: Path) -> None:
    result = run_cli("render", str(resolved / "gh200.conda-lock.yml"), "--platform", "linux-aarch64")
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert "@EXPLICIT" in lines and "# platform: linux-aarch64" in lines
    urls = [line for line in lines if line.startswith("https://")]
    assert len(urls) == len(load_lock(resolved / "gh200.conda-lock.yml").package)
    assert all("#" in u and len(u.rsplit("#", 1)[1]) in (32, 64) for u in urls)
    wrong = run_cli("render", str(resolved / "gh200.conda-lock.yml"), "--platform", "linux-64")
    assert wrong.returncode == 1 and "error:" in wrong.stderr


def test_exclude_newer_passes_through(example_copy: Path, snapshot: Path) -> None:
    text = example_copy.read_text()
    example_copy.write_text(
        text.replace('platforms = ["linux-64"]', 'platforms = ["linux-64"]\nexclude-newer = "2026-01-01"')
    )
    api.resolve(example_copy, targets=["h100"], aliases=alias(snapshot))
    lock = load_lock(example_copy.parent / "locks" / "h100.conda-lock.yml")
    assert pick(example_copy.parent / "locks" / "h100.conda-lock.yml", "pytorch")[0] == "2.8.0"
    assert lock.meta("exclude-newer") == "2026-01-01"


@pytest.mark.slow
def test_snapshot_over_http_gives_the_same_choices(
    example_copy: Path, snapshot: Path, http_channel, resolved: Path
) -> None:
    url = http_channel(snapshot)
    results = api.resolve(example_copy, aliases=[f"conda-forge={url}"])
    assert [r.target for r in results] == list(TARGETS)
    for target in TARGETS:
        name = f"{target}.conda-lock.yml"
        over_http = {(p.name, p.version, p.build) for p in load_lock(example_copy.parent / "locks" / name).package}
        local = {(p.name, p.version, p.build) for p in load_lock(resolved / name).package}
        assert over_http == local, target
