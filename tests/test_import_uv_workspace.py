"""uv workspaces, extras reached through dependency edges, package-scoped conflicts, default groups and
patch-level Pythons, judged by uv itself: small projects locked by the real `uv lock`, and for each choice
the packages lockgen imports per Linux platform equal to what `uv export --frozen` selects with the same
choice (or both refuse it)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from lockgen.model.requests import ImportOptions
from lockgen.api.import_lock import import_lock
from tests.conftest import run_cli
from tests.uv_oracle import lockgen_takes, uv_export, uv_selects, write_project

pytestmark = [pytest.mark.network, pytest.mark.slow]  # every test here solves with uv or builds an image first
PLATFORMS = ["linux-64", "linux-aarch64"]
BUILD = '\n[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n'
ROOT = (
    """[project]
name = "app"
version = "0.1.0"
requires-python = ">=3.10"
dependencies = ["six", "lib"]

[project.optional-dependencies]
cpu = ["lib[cpu-x]"]
cu128 = ["lib[cu128-x]", "certifi"]
vllm = ["packaging==24.0"]

[dependency-groups]
dev = ["iniconfig"]
lint = ["tomli"]

[tool.uv]
conflicts = [
  [{ extra = "cpu" }, { extra = "cu128" }],
  [{ package = "lib", extra = "cpu-x" }, { package = "lib", extra = "cu128-x" }],
  [{ package = "other", extra = "vllm" }, { package = "app", extra = "vllm" }],
]
DEFAULTS
[tool.uv.sources]
lib = { workspace = true }
other = { workspace = true }

[tool.uv.workspace]
members = ["packages/*"]
"""
    + BUILD
)
LIB = (
    """[project]
name = "lib"
version = "0.1.0"
requires-python = ">=3.10"
dependencies = ["attrs"]

[project.optional-dependencies]
cpu-x = ["idna==3.7"]
cu128-x = ["idna==3.10", "wheel; platform_machine == 'x86_64'"]
"""
    + BUILD
)
OTHER = (
    """[project]
name = "other"
version = "0.1.0"
requires-python = ">=3.10"
dependencies = ["pyparsing"]

[project.optional-dependencies]
vllm = ["packaging==24.2"]
"""
    + BUILD
)


def _workspace(folder: Path, defaults: str = "") -> Path:
    return write_project(
        folder,
        {
            "pyproject.toml": ROOT.replace("DEFAULTS", defaults),
            "packages/lib/pyproject.toml": LIB,
            "packages/other/pyproject.toml": OTHER,
        },
    )


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _workspace(tmp_path_factory.mktemp("workspace"))


CHOICES = [
    ([], ImportOptions()),
    (["--extra", "cu128"], ImportOptions(extras=("cu128",))),  # lib[cu128-x] through the edge: wheel on x86_64 only
    (["--extra", "cpu"], ImportOptions(extras=("cpu",))),
    (["--extra", "vllm"], ImportOptions(extras=("vllm",))),
    (
        ["--extra", "cu128", "--extra", "vllm", "--group", "lint", "--no-dev"],
        ImportOptions(extras=("cu128", "vllm"), groups=("lint",), dev=False),
    ),
    (["--all-packages"], ImportOptions(all_packages=True)),
    (["--all-packages", "--extra", "cpu-x"], ImportOptions(all_packages=True, extras=("cpu-x",))),
    (["--package", "other", "--extra", "vllm"], ImportOptions(package="other", extras=("vllm",))),
    (["--package", "lib", "--extra", "cu128-x"], ImportOptions(package="lib", extras=("cu128-x",))),
]


@pytest.mark.parametrize("flags, choices", CHOICES, ids=lambda v: " ".join(v) if isinstance(v, list) else "")
@pytest.mark.parametrize("platform", PLATFORMS)
def test_a_workspace_imports_what_uv_installs(
    workspace: Path, tmp_path: Path, flags: list[str], choices: ImportOptions, platform: str
) -> None:
    expected = uv_selects(workspace, flags, platform, "3.10")
    assert lockgen_takes(workspace / "uv.lock", choices, platform, tmp_path / "t.yml") == expected


def test_member_extras_reached_through_an_edge_bring_their_cuda_fork(workspace: Path, tmp_path: Path) -> None:
    """The case that once came out wrong without a word: the root's extra names `lib[cu128-x]`, whose
    packages (and the `packaging` fork their markers pick) only come when lib's extra is active."""
    _, lock = import_lock(workspace / "uv.lock", "t", tmp_path / "t.yml", ImportOptions(extras=("cu128",)))
    x86 = {p.name: p.version for p in lock.packages_for("linux-64")}
    arm = {p.name: p.version for p in lock.packages_for("linux-aarch64")}
    assert (x86["idna"], x86["wheel"], x86["packaging"]) == ("3.10", "0.48.0", "24.2")
    assert "wheel" not in arm and "packaging" not in arm and "pyparsing" not in x86  # other's own: not the root's


@pytest.mark.parametrize(
    "flags, message, hint",
    [
        (
            ["--all-packages", "--extra", "vllm"],
            r"`app\[vllm\]` and `other\[vllm\]` conflicting",
            "--extra vllm with --package app",
        ),
        (["--extra", "nope"], "the project `app` has no extra nope", "its extras: cpu, cu128, vllm"),
        (["--group", "nope"], "the project `app` has no dependency group nope", "its groups: dev, lint"),
        (["--package", "nope"], "the lock's workspace has no member `nope`", "its members: app, lib, other"),
        (
            ["--all-packages", "--extra", "nope"],
            "no workspace member has the extra nope",
            "cpu, cpu-x, cu128, cu128-x, vllm",
        ),
    ],
)
def test_choices_uv_refuses_are_refused_naming_what_exists(
    workspace: Path, tmp_path: Path, flags: list[str], message: str, hint: str
) -> None:
    assert uv_export(workspace, flags).returncode != 0
    done = run_cli("import", str(workspace / "uv.lock"), "-t", "t", "-o", str(tmp_path / "t.yml"), *flags)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    errors, hints = (
        [line for line in lines if line.startswith("error:")],
        [line for line in lines if line.startswith("hint:")],
    )
    assert len(errors) == 1 and len(hints) == 1 and re.search(message, errors[0]) and hint in hints[0]
    assert not (tmp_path / "t.yml").exists()


@pytest.mark.parametrize(
    "defaults, flags",
    [
        ('default-groups = ["dev", "lint"]\n', []),
        ('default-groups = "all"\n', []),
        ('default-groups = ["lint"]\n', ["--group", "dev"]),
        ('default-groups = "all"\n', ["--no-default-groups"]),
    ],
)
@pytest.mark.parametrize("platform", PLATFORMS)
def test_default_groups_come_from_the_pyproject(tmp_path: Path, defaults: str, flags: list[str], platform: str) -> None:
    project = _workspace(tmp_path / "project", defaults)
    choices = ImportOptions(
        groups=tuple(flags[1:]) if flags[:1] == ["--group"] else (), no_default_groups="--no-default-groups" in flags
    )
    expected = uv_selects(project, flags, platform, "3.10")
    assert lockgen_takes(project / "uv.lock", choices, platform, tmp_path / "t.yml") == expected
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(project / "uv.lock", alone / "uv.lock")
    given = lockgen_takes(alone / "uv.lock", choices, platform, tmp_path / "u.yml", project=project / "pyproject.toml")
    assert given == expected


def test_without_a_pyproject_the_assumed_default_groups_are_said_once(workspace: Path, tmp_path: Path) -> None:
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(workspace / "uv.lock", alone / "uv.lock")
    done = run_cli("import", str(alone / "uv.lock"), "-t", "t", "-o", str(tmp_path / "t.yml"))
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and 'assumed uv\'s default-groups ["dev"]' in warnings[0] and "--project" in warnings[0]
    taken = lockgen_takes(alone / "uv.lock", ImportOptions(), "linux-64", tmp_path / "u.yml")
    assert taken == uv_selects(workspace, [], "linux-64", "3.10")  # uv's own default, with the pyproject saying none
    quiet = run_cli("import", str(alone / "uv.lock"), "-t", "t", "-o", str(tmp_path / "t.yml"), "--no-default-groups")
    assert quiet.returncode == 0 and "warning:" not in quiet.stderr
    beside = run_cli("import", str(workspace / "uv.lock"), "-t", "t", "-o", str(tmp_path / "t.yml"))
    assert beside.returncode == 0 and "warning:" not in beside.stderr


@pytest.mark.parametrize("python, tomli", [("3.13.14", True), ("3.13", True), ("3.13.15", False)])
@pytest.mark.parametrize("platform", PLATFORMS)
def test_a_patch_level_python_is_judged_with_its_patch(tmp_path: Path, python: str, tomli: bool, platform: str) -> None:
    """requires-python `>=3.13.14, <3.14` admits 3.13.14 (and `3.13` means its oldest admitted patch, 3.13.14);
    a `python_full_version` marker sees the patch. (uv writes the lock with this interpreter's Python range;
    the lock's requires-python is then narrowed as uv writes it for such a project.)"""
    text = (
        '[project]\nname = "patchy"\nversion = "0.1.0"\nrequires-python = ">=3.10"\ndependencies = ["six", "tomli ; '
        "python_full_version < '3.13.15'\"]\n\n[tool.uv]\npackage = false\n"
    )
    project = write_project(tmp_path / "patchy", {"pyproject.toml": text})
    for name in ("uv.lock", "pyproject.toml"):
        path = project / name
        path.write_text(path.read_text().replace('requires-python = ">=3.10"', 'requires-python = ">=3.13.14, <3.14"'))
    assert 'requires-python = ">=3.13.14, <3.14"' in (project / "uv.lock").read_text()
    full = "3.13.14" if python == "3.13" else python
    expected = uv_selects(project, [], platform, full)
    assert any(name == "tomli" for name, _ in expected) == tomli
    assert lockgen_takes(project / "uv.lock", ImportOptions(python=python), platform, tmp_path / "t.yml") == expected
    below = run_cli("import", str(project / "uv.lock"), "-t", "t", "-o", str(tmp_path / "b.yml"), "--python", "3.13.13")
    assert below.returncode == 1 and "outside the lock's requires-python `>=3.13.14, <3.14`" in below.stderr
    assert "hint: pass one of: 3.13" in below.stderr


@pytest.fixture(scope="module")
def virtual_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace whose root is no project: its members and its own dependency group."""
    member = '[project]\nname = "NAME"\nversion = "0.1.0"\nrequires-python = ">=3.10"\ndependencies = ["DEP"]\n' + BUILD
    return write_project(
        tmp_path_factory.mktemp("virtual"),
        {
            "pyproject.toml": (
                '[tool.uv.workspace]\nmembers = ["packages/*"]\n\n[dependency-groups]\ndev = ["iniconfig"]\n'
            ),
            "packages/a/pyproject.toml": member.replace("NAME", "a").replace("DEP", "six"),
            "packages/b/pyproject.toml": member.replace("NAME", "b").replace("DEP", "attrs"),
        },
    )


@pytest.mark.parametrize(
    "flags, choices",
    [([], ImportOptions()), (["--no-dev"], ImportOptions(dev=False)), (["--package", "a"], ImportOptions(package="a"))],
    ids=["default", "no-dev", "a"],
)
def test_a_workspace_root_that_is_no_project_installs_every_member_and_its_groups(
    virtual_root: Path, tmp_path: Path, flags: list[str], choices: ImportOptions
) -> None:
    expected = uv_selects(virtual_root, flags, "linux-64", "3.10")
    assert lockgen_takes(virtual_root / "uv.lock", choices, "linux-64", tmp_path / "t.yml") == expected


@pytest.fixture(scope="module")
def virtual_root_groups(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace whose root is no project, with two groups of its own (`dev`, a default one, and `lint`)."""
    member = '[project]\nname = "NAME"\nversion = "0.1.0"\nrequires-python = ">=3.10"\ndependencies = ["DEP"]\n' + BUILD
    return write_project(
        tmp_path_factory.mktemp("virtual-groups"),
        {
            "pyproject.toml": (
                '[tool.uv.workspace]\nmembers = ["packages/*"]\n\n'
                '[dependency-groups]\ndev = ["iniconfig"]\nlint = ["pyflakes"]\n'
            ),
            "packages/a/pyproject.toml": member.replace("NAME", "a").replace("DEP", "six"),
            "packages/b/pyproject.toml": member.replace("NAME", "b").replace("DEP", "attrs"),
        },
    )


@pytest.mark.parametrize(
    "flags, choices",
    [
        (["--all-packages"], ImportOptions(all_packages=True)),
        (["--all-packages", "--group", "lint"], ImportOptions(all_packages=True, groups=("lint",))),
        (["--package", "a", "--group", "lint"], ImportOptions(package="a", groups=("lint",))),
        (["--all-packages", "--no-dev"], ImportOptions(all_packages=True, dev=False)),
    ],
    ids=["all-packages", "all-packages-lint", "a-lint", "all-packages-no-dev"],
)
def test_a_virtual_roots_groups_come_with_all_packages_and_package_as_uv_exports_them(
    virtual_root_groups: Path, tmp_path: Path, flags: list[str], choices: ImportOptions
) -> None:
    """The root's `dev` group was dropped with --all-packages and its other groups refused with --package or
    --all-packages; uv export selects them (uv is the oracle)."""
    expected = uv_selects(virtual_root_groups, flags, "linux-64", "3.10")
    assert lockgen_takes(virtual_root_groups / "uv.lock", choices, "linux-64", tmp_path / "t.yml") == expected
