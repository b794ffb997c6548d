"""uv.lock import judged by uv itself: for each choice of extras, groups and Python, the packages lockgen
takes for a platform (plus those it lists as not convertible) are exactly the ones `uv export --frozen`
selects with the same choices, its markers evaluated for that platform. On a lock with `[tool.uv]
conflicts` (cpu/cu128 extras, tests/fixtures/foreign/conflicts) and on the shared corpus's uv.locks."""

from __future__ import annotations

import hashlib
import shutil
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lockgen.model.requests import ImportOptions
from lockgen.api.import_lock import import_lock
from lockgen.errors import UserError
from tests.conftest import NEEDS_SHARED, has_shared, run_cli, shared_dir
from tests.uv_oracle import lockgen_takes, uv_selects

CONFLICTS = Path(__file__).parent / "fixtures" / "foreign" / "conflicts"


@pytest.mark.parametrize(
    "flags, choices",
    [
        ([], ImportOptions()),
        (["--extra", "cpu"], ImportOptions(extras=("cpu",))),
        (["--extra", "cu128", "--group", "lint"], ImportOptions(extras=("cu128",), groups=("lint",))),
        (["--extra", "cu128", "--no-dev"], ImportOptions(extras=("cu128",), dev=False)),
        (["--python", "3.12", "--extra", "cpu"], ImportOptions(python="3.12", extras=("cpu",))),
    ],
)
@pytest.mark.parametrize("platform", ["linux-64", "linux-aarch64"])
def test_a_lock_with_conflicting_cuda_extras_imports_what_uv_installs(
    tmp_path: Path, flags: list[str], choices: ImportOptions, platform: str
) -> None:
    project = tmp_path / "project"
    shutil.copytree(CONFLICTS, project)
    python = choices.python or "3.10"
    expected = uv_selects(project, flags, platform, python)
    assert lockgen_takes(project / "uv.lock", choices, platform, tmp_path / "t.yml") == expected
    assert ("colorama", "0.4.6") not in expected  # win32 only
    assert (("tomli", "2.5.0") in expected) == (python == "3.10")  # python < 3.11 only


@pytest.mark.slow
def test_conflicting_extras_and_unknown_choices_are_refused_with_what_exists(tmp_path: Path) -> None:
    source = CONFLICTS / "uv.lock"
    with pytest.raises(UserError, match=r"`trainer\[cpu\]` and `trainer\[cu128\]` conflicting") as raised:
        import_lock(source, "t", tmp_path / "t.yml", ImportOptions(extras=("cpu", "cu128")))
    assert raised.value.hint == "choose one, e.g. --extra cpu"
    with pytest.raises(UserError, match="no extra gpu"):
        import_lock(source, "t", tmp_path / "t.yml", ImportOptions(extras=("gpu",)))
    with pytest.raises(UserError, match="no dependency group docs"):
        import_lock(source, "t", tmp_path / "t.yml", ImportOptions(groups=("docs",)))
    outside = run_cli("import", str(source), "--target", "t", "--out", str(tmp_path / "t.yml"), "--python", "3.9")
    assert outside.returncode == 1 and "outside the lock's requires-python `>=3.10`" in outside.stderr
    assert "hint: pass one of: 3.10, 3.11" in outside.stderr and not (tmp_path / "t.yml").exists()
    chosen = run_cli("import", str(source), "--target", "t", "--out", str(tmp_path / "t.yml"), "--extra", "cu128")
    assert chosen.returncode == 0, chosen.stderr


CORPUS_UV = sorted(shared_dir().glob("corpus/*uv.lock")) if has_shared() else []


@pytest.mark.slow
@pytest.mark.skipif(not has_shared(), reason=NEEDS_SHARED)
@pytest.mark.parametrize("source", CORPUS_UV, ids=lambda p: p.name[:30])
@pytest.mark.parametrize("platform, python", [("linux-64", "3.11"), ("linux-aarch64", "3.12"), ("linux-64", "3.13")])
def test_the_shared_uv_locks_import_what_uv_installs(tmp_path: Path, source: Path, platform: str, python: str) -> None:
    data = tomllib.loads(source.read_text())
    root = next(p for p in data["package"] if "editable" in p["source"] or "virtual" in p["source"])
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(source, project / "uv.lock")
    (project / "pyproject.toml").write_text(
        f'[project]\nname = "{root["name"]}"\nversion = "0"\nrequires-python = "{data["requires-python"]}"\n'
    )
    expected = uv_selects(project, ["--python", python], platform, python)
    taken = lockgen_takes(project / "uv.lock", ImportOptions(python=python), platform, tmp_path / "t.yml")
    assert taken == expected, (sorted(taken - expected), sorted(expected - taken))


WHEELS_LOCK = """version = 1
revision = 2
requires-python = ">=3.11"

[[package]]
name = "tiny"
version = "0.1.0"
source = { virtual = "." }
dependencies = [{ name = "torch" }, { name = "flash-attn" }, { name = "capped" }]

[[package]]
name = "torch"
version = "2.6.0+cpu"
source = { registry = "https://download.pytorch.org/whl/cpu" }
wheels = [
    { url = "https://download.pytorch.org/whl/cpu/torch-2.6.0%2Bcpu-cp311-cp311-linux_x86_64.whl", hash = "sha256:HASH1" },
    { url = "https://download.pytorch.org/whl/cpu/torch-2.6.0%2Bcpu-cp311-cp311-win_amd64.whl", hash = "sha256:HASH2" },
]

[[package]]
name = "flash-attn"
version = "2.7.4.post1+cu12torch2.6cxx11abifalse"
source = { url = "https://github.com/Dao-AILab/flash-attention/releases/download/v2.7.4.post1/flash_attn-2.7.4.post1+cu12torch2.6cxx11abiFALSE-cp311-cp311-linux_x86_64.whl" }
wheels = [
    { url = "https://github.com/Dao-AILab/flash-attention/releases/download/v2.7.4.post1/flash_attn-2.7.4.post1+cu12torch2.6cxx11abiFALSE-cp311-cp311-linux_x86_64.whl", hash = "sha256:HASH3" },
]

[[package]]
name = "capped"
version = "1.0"
source = { registry = "https://pypi.org/simple" }
sdist = { url = "https://files.example/capped-1.0.tar.gz", hash = "sha256:HASH4" }
wheels = [
    { url = "https://files.example/capped-1.0-cp311-cp311-manylinux_2_35_x86_64.whl", hash = "sha256:HASH5" },
    { url = "https://files.example/capped-1.0-cp311-cp311-manylinux_2_39_aarch64.whl", hash = "sha256:HASH6" },
]
"""
for _number in range(1, 7):
    WHEELS_LOCK = WHEELS_LOCK.replace(f"HASH{_number}", f"{_number}" * 64)


@pytest.mark.slow
def test_plain_linux_wheels_are_wheels_and_glibc_caps_are_named(tmp_path: Path) -> None:
    """torch +cpu from PyTorch's index and flash-attn from a release page are tagged plain `linux_x86_64`:
    wheels for linux-64. A wheel that needs a newer glibc is named with that glibc and --glibc admitting it."""
    source = tmp_path / "uv.lock"
    source.write_text(WHEELS_LOCK)
    _, lock = import_lock(source, "t", tmp_path / "t.yml", ImportOptions())
    x86 = {p.name: p.url.rsplit("/", 1)[-1] for p in lock.packages_for("linux-64")}
    assert x86 == {
        "torch": "torch-2.6.0%2Bcpu-cp311-cp311-linux_x86_64.whl",
        "flash-attn": "flash_attn-2.7.4.post1+cu12torch2.6cxx11abiFALSE-cp311-cp311-linux_x86_64.whl",
    }
    skipped = lock.meta("skipped").split("; ")
    assert (
        "linux-64: `capped` 1.0 needs glibc 2.35 on linux-64 (its wheel is manylinux_2_35, newer than --glibc "
        "2.28): pass --glibc 2.35 to admit it"
    ) in skipped
    assert any(s.startswith("linux-aarch64: `capped` 1.0 needs glibc 2.39") and "--glibc 2.39" in s for s in skipped)
    assert "linux-aarch64: `torch` 2.6.0+cpu has no wheel for linux-aarch64 at CPython 3.11" in skipped
    _, newer = import_lock(source, "t", tmp_path / "u.yml", ImportOptions(glibc="2.35"))
    assert {p.name for p in newer.packages_for("linux-64")} == {"torch", "flash-attn", "capped"}
    bad = run_cli("import", str(source), "-t", "t", "-o", str(tmp_path / "v.yml"), "--glibc", "new")
    assert (
        bad.returncode == 1 and "error: --glibc new is not a glibc version 2.NN" in bad.stderr and "hint:" in bad.stderr
    )


@pytest.mark.parametrize(
    ("source", "python"),
    [(CONFLICTS / "uv.lock", "3.11"), (Path(__file__).parent / "fixtures" / "foreign" / "pylock.tiny.toml", "3.11")],
)
def test_a_pure_pypi_import_records_the_python_its_wheels_were_chosen_for(
    tmp_path: Path, source: Path, python: str
) -> None:
    """A uv.lock or pylock imported with --python 3.11 holds wheels and no conda python: the lock records the
    CPython they were chosen for (`lockgen.python.<platform>`, as resolve's PyPI layer does), which materialize,
    check and export read; without it materialize refused "the lock has wheels but names no Python version"."""
    from lockgen.core.env.expected_env import lock_python

    _, lock = import_lock(source, "t", tmp_path / "t.yml", ImportOptions(python=python))
    assert lock.metadata.platforms and all(
        lock_python(lock, platform) == python for platform in lock.metadata.platforms
    )
    assert all(
        lock.metadata.custom_metadata[f"lockgen.python.{platform}"] == python for platform in lock.metadata.platforms
    )


@pytest.mark.slow
@pytest.mark.parametrize("platform", ["linux-64", "linux-aarch64"])
def test_without_python_the_import_takes_the_workspaces_python_version_as_uv_does(
    tmp_path: Path, platform: str
) -> None:
    """uv takes a workspace's `.python-version` before requires-python: `uv python pin` reads 3.12 there, and the
    import takes what `uv export` selects for 3.12 (no tomli, which is for Python < 3.11), saying where the
    Python came from; it took the oldest requires-python admits (3.10) and tomli with it."""
    import subprocess

    from lockgen.adapters.pypi.uv_resolver import uv_binary

    project = tmp_path / "project"
    shutil.copytree(CONFLICTS, project)
    (project / ".python-version").write_text("# the team's Python\n3.12\n")
    pinned = subprocess.run(
        [uv_binary(), "python", "pin", "--no-python-downloads"], cwd=project, capture_output=True, text=True
    )
    assert pinned.returncode == 0 and pinned.stdout.strip() == "3.12", pinned.stderr
    expected = uv_selects(project, [], platform, pinned.stdout.strip())
    assert lockgen_takes(project / "uv.lock", ImportOptions(), platform, tmp_path / "t.yml") == expected
    assert ("tomli", "2.5.0") not in expected
    done = run_cli("import", str(project / "uv.lock"), "--target", "t", "--out", str(tmp_path / "u.yml"))
    assert (
        done.returncode == 0
        and "CPython 3.12 from .python-version beside the pyproject.toml, as uv picks it" in done.stdout + done.stderr
    ), done.stdout + done.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    "flags, choices",
    [
        (["--all-groups"], ImportOptions(all_groups=True)),
        (["--only-group", "lint"], ImportOptions(only_groups=("lint",))),
        (["--all-groups", "--no-group", "dev"], ImportOptions(all_groups=True, no_groups=("dev",))),
        (["--no-group", "dev", "--extra", "cpu"], ImportOptions(no_groups=("dev",), extras=("cpu",))),
    ],
    ids=["all-groups", "only-group", "all-groups-but-dev", "no-group-dev"],
)
def test_the_three_group_flags_select_what_uv_exports(tmp_path: Path, flags: list[str], choices: ImportOptions) -> None:
    """--all-groups, --only-group and --no-group, which the import lacked, select what `uv export` does with them."""
    project = tmp_path / "project"
    shutil.copytree(CONFLICTS, project)
    expected = uv_selects(project, flags, "linux-64", "3.10")
    assert lockgen_takes(project / "uv.lock", choices, "linux-64", tmp_path / "t.yml") == expected
    done = run_cli("import", str(project / "uv.lock"), "--target", "t", "--out", str(tmp_path / "cli.yml"), *flags)
    assert done.returncode == 0, done.stderr


def test_a_python_version_pin_is_read_as_uv_reads_it_or_refused(tmp_path: Path) -> None:
    from lockgen.adapters.foreign.uv_project import pinned_python

    for text, pinned in [
        ("3.12\n", "3.12"),
        ("# a comment\n\n3.11.9\n", "3.11.9"),
        ("cpython@3.13\n", "3.13"),
        ("cpython-3.10\n", "3.10"),
    ]:
        (tmp_path / ".python-version").write_text(text)
        assert pinned_python([tmp_path]) == (pinned, tmp_path / ".python-version")
    (tmp_path / ".python-version").write_text("pypy3.10\n")
    with pytest.raises(UserError, match=r"not a CPython 3\.X version"):
        pinned_python([tmp_path])
    assert pinned_python([tmp_path / "nowhere"]) is None


@pytest.mark.slow
@given(st.binary(max_size=60) | st.text(max_size=60).map(str.encode))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_python_version_file_is_a_pin_or_one_refusal(tmp_path: Path, text: bytes) -> None:
    from lockgen.adapters.foreign.uv_project import pinned_python

    (tmp_path / ".python-version").write_bytes(text)
    try:
        found = pinned_python([tmp_path])
    except UserError as refused:
        assert "pass --python X.Y" in refused.hint
    else:
        assert found is not None and found[0].startswith("3.")


GIT_URL = (
    "https://github.com/org/foo%20bar.git?rev=v1.0&subdirectory=pkgs%2Ffoo#0123456789abcdef0123456789abcdef01234567"
)


def test_a_git_source_is_named_by_its_url_as_the_lock_writes_it_commit_included(tmp_path: Path) -> None:
    """What a git package left out says is the URL uv wrote, byte for byte, its `#commit` with it: the commit
    was cut off, and the query re-encoded with the `):` after it (`pkgs%2Ffoo%29%3A`) by the credential scrub."""
    source = tmp_path / "uv.lock"
    source.write_text(
        'version = 1\nrevision = 2\nrequires-python = ">=3.11"\n\n[[package]]\nname = "tiny"\nversion = '
        '"0.1.0"\nsource = { virtual = "." }\n'
        'dependencies = [{ name = "foo" }, { name = "bar" }]\n\n[[package]]\nname = "foo"\nversion = "1.0"\n'
        f'source = {{ git = "{GIT_URL}" }}\n\n[[package]]\nname = "bar"\nversion = "1.0"\nsource = {{ registry = '
        '"https://pypi.org/simple" }\n'
        f'wheels = [{{ url = "https://files.example/bar-1.0-py3-none-any.whl", hash = "sha256:{"0" * 64}" }}]\n'
    )
    result = run_cli("import", str(source), "-t", "t", "-o", str(tmp_path / "t.yml"))
    assert result.returncode == 0, result.stderr
    said = f"linux-64: `foo` 1.0 comes from git ({GIT_URL}): build a wheel and pin it"
    assert said in result.stderr
    _, lock = import_lock(source, "t", tmp_path / "u.yml", ImportOptions())
    assert said in lock.meta("skipped").split("; ")


def test_a_generated_lock_imports_to_the_bytes_main_wrote(tmp_path: Path) -> None:
    """The import reads a large uv.lock in pieces, reduced as it is read, and writes its lock in pieces: the bytes
    are the ones written before that (f262a09) for the benchmark's generated 300-package lock, whose every package
    is reached under markers naming extras. Its digest changes only with a deliberate change of the lock's format."""
    from benchmarks.bench_uv_lock_import import uv_lock_text

    source = tmp_path / "uv.lock"
    source.write_text(uv_lock_text(300))
    path, lock = import_lock(source, "cpu", tmp_path / "out.yml", ImportOptions(python="3.12"))
    assert len(lock.package) == 600
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert digest == "09dc9d2ddcf41ca5032789f382aad73455aa3818a71c9b239c468dccf678694a"


def test_the_benchmark_s_lock_imports_to_the_bytes_it_always_did(tmp_path: Path) -> None:
    """The import's speed-ups change no byte: the benchmark's generated uv.lock of 2,000 packages (a tree of extras
    and markers, two wheels each) imports to the lock main wrote before them (session 28, at 9e9b0f8; the sizes the
    benchmark runs gave 7a65b085... at 10k, 213a393b... at 30k and 71c0c749... at 300k, docs/measurements.md)."""
    from benchmarks.bench_uv_lock_import import uv_lock_text

    source = tmp_path / "uv.lock"
    source.write_text(uv_lock_text(2000))
    out, _ = import_lock(source, "cpu", tmp_path / "out.yml", ImportOptions(python="3.12"))
    assert hashlib.sha256(out.read_bytes()).hexdigest() == (
        "e34fba13f2e95871a55a5ca815d79e66af05553a24ff57fcae5f7f203a7e52d4"
    )
