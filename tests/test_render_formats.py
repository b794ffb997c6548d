"""`render --format` for the tools other teams use, each checked by the tool that reads it: a pylock.toml
and a hashed requirements file installed by uv into a fresh venv give exactly the lock's packages, from
a loopback index; a pylock.toml uv itself exports imports as the same packages as its uv.lock;
environment.yml pins every conda package; and lockgen -> pylock.toml -> lockgen keeps every URL and hash."""

from __future__ import annotations

import functools
import hashlib
import json
import http.server
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from lockgen.adapters.lock.lockfile_yaml import load_lock
from lockgen.model.requests import ImportOptions
from lockgen.adapters.pypi.uv_resolver import uv_binary
from lockgen.api import resolve as api
from lockgen.api.import_lock import import_lock
from lockgen.api.locks import render
from lockgen.errors import UserError
from tests.conftest import EXAMPLE_STACK, _QuietHandler, run_cli
from tests.test_import_uv import CONFLICTS
from tests.uv_oracle import normal, uv_selects
from tests.wheel_index import Wheel, build_index, build_wheel


@pytest.fixture(scope="module")
def pypi_lock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A lock of three pure wheels resolved from a loopback index (which stays up for the installs)."""
    root = build_index(
        tmp_path_factory.mktemp("index"),
        [Wheel("alpha", "1.0"), Wheel("gamma", "1.0", requires=("alpha",)), Wheel("omega", "2.1")],
    )
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    folder = tmp_path_factory.mktemp("stack")
    stack = folder / "stack.toml"
    stack.write_text(
        f'[stack]\nname = "formats"\npython = "3.11"\nplatforms = ["linux-64"]\n'
        f'[pypi-dependencies]\ngamma = "*"\nomega = "*"\n'
        f'[pypi-options]\nindex-url = "http://127.0.0.1:{server.server_address[1]}/simple"\n'
        '[targets.cpu]\narch = "cpu"\n'
    )
    api.resolve(stack)
    yield folder / "locks" / "cpu.conda-lock.yml"
    server.shutdown()


def _venv(folder: Path) -> Path:
    subprocess.run(
        [uv_binary(), "venv", "-q", "--python", shutil.which("python3.11") or "3.11", str(folder)], check=True
    )
    return folder / "bin" / "python"


def _installed(python: Path) -> set[tuple[str, str]]:
    listed = subprocess.run(
        [uv_binary(), "pip", "list", "--format", "json", "--python", str(python)],
        capture_output=True,
        text=True,
        check=True,
    )
    return {(normal(entry["name"]), entry["version"]) for entry in json.loads(listed.stdout)}


@pytest.mark.slow
def test_pylock_and_requirements_install_exactly_the_lock_with_uv(tmp_path: Path, pypi_lock: Path) -> None:
    expected = {(normal(p.name), p.version) for p in load_lock(pypi_lock).package if p.manager == "pip"}
    assert expected == {("alpha", "1.0"), ("gamma", "1.0"), ("omega", "2.1")}
    done = run_cli("render", str(pypi_lock), "--format", "pylock", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "pylock.cpu.toml", done.stderr
    python = _venv(tmp_path / "a")
    subprocess.run(
        [uv_binary(), "pip", "install", "-q", "--python", str(python), "-r", str(tmp_path / "pylock.cpu.toml")],
        check=True,
        capture_output=True,
    )
    assert _installed(python) == expected
    requirements = tmp_path / "requirements.txt"
    render(pypi_lock, None, requirements, "requirements")
    assert all("--hash=sha256:" in line for line in requirements.read_text().splitlines() if not line.startswith("#"))
    python = _venv(tmp_path / "b")
    subprocess.run(
        [
            uv_binary(),
            "pip",
            "install",
            "-q",
            "--python",
            str(python),
            "--require-hashes",
            "--no-deps",
            "-r",
            str(requirements),
        ],
        check=True,
        capture_output=True,
    )
    assert _installed(python) == expected


def test_a_local_version_wheel_goes_through_pylock_as_uv_reads_it(tmp_path: Path) -> None:
    """A `+cu130` wheel, its URL `%2B`-encoded as PyTorch's index writes it, imported from a uv.lock and
    rendered: the pylock names the wheel by its file name (PEP 751) and uv installs it into a fresh venv."""
    (tmp_path / "wheels").mkdir()
    wheel = build_wheel(Wheel("tinycuda", "1.0+cu130"), tmp_path / "wheels")
    assert wheel.name == "tinycuda-1.0+cu130-py3-none-any.whl"
    url = wheel.parent.as_uri() + "/tinycuda-1.0%2Bcu130-py3-none-any.whl"
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    source = tmp_path / "uv.lock"
    source.write_text(
        f'version = 1\nrevision = 2\nrequires-python = ">=3.11"\n\n[[package]]\nname = "app"\n'
        f'version = "0.1.0"\nsource = {{ virtual = "." }}\ndependencies = [{{ name = "tinycuda" }}]\n\n'
        '[[package]]\nname = "tinycuda"\nversion = "1.0+cu130"\nsource = { registry = '
        '"https://download.pytorch.org/whl/cu130" }\n'
        f'wheels = [{{ url = "{url}", hash = "sha256:{digest}" }}]\n'
    )
    import_lock(source, "cu130", tmp_path / "cu130.conda-lock.yml", ImportOptions(python="3.11"))
    pylock = tmp_path / "pylock.cu130.toml"
    render(tmp_path / "cu130.conda-lock.yml", "linux-64", pylock, "pylock")
    assert 'name = "tinycuda-1.0+cu130-py3-none-any.whl"' in pylock.read_text() and url in pylock.read_text()
    python = _venv(tmp_path / "venv")
    done = subprocess.run(
        [uv_binary(), "pip", "install", "--python", str(python), "-r", str(pylock)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert _installed(python) == {("tinycuda", "1.0+cu130")}


def test_lockgen_to_pylock_and_back_keeps_every_url_and_hash(tmp_path: Path, pypi_lock: Path) -> None:
    out = tmp_path / "pylock.cpu.toml"
    render(pypi_lock, None, out, "pylock")
    _, back = import_lock(out, "back", tmp_path / "back.conda-lock.yml")
    key = lambda lock: {(p.name, p.version, p.url, p.hash.sha256) for p in lock.packages_for("linux-64")}  # noqa: E731
    assert key(back) == key(load_lock(pypi_lock))
    assert "linux-aarch64: the file's environments do not include it" in back.meta("skipped")


@pytest.mark.parametrize(
    "flags, choices",
    [
        (["--extra", "cu128"], ImportOptions(extras=("cu128",))),
        (["--extra", "cpu", "--group", "lint"], ImportOptions(extras=("cpu",), groups=("lint",))),
    ],
)
def test_a_pylock_uv_exports_imports_what_uv_installs(tmp_path: Path, flags: list[str], choices: ImportOptions) -> None:
    project = tmp_path / "project"
    shutil.copytree(CONFLICTS, project)
    subprocess.run(
        [
            uv_binary(),
            "export",
            "--frozen",
            "--format",
            "pylock.toml",
            "--no-emit-project",
            *flags,
            "-o",
            "pylock.toml",
        ],
        cwd=project,
        check=True,
        capture_output=True,
    )
    _, lock = import_lock(project / "pylock.toml", "t", tmp_path / "t.yml", ImportOptions(python="3.10"))
    for platform in ("linux-64", "linux-aarch64"):
        assert {(normal(p.name), p.version) for p in lock.packages_for(platform)} == uv_selects(
            project, flags, platform, "3.10"
        )


@pytest.mark.slow
def test_environment_yml_pins_every_conda_package_and_errors_name_the_way_out(tmp_path: Path) -> None:
    lock_path = EXAMPLE_STACK.parent / "locks" / "h100.conda-lock.yml"
    lock = load_lock(lock_path)
    document = yaml.safe_load(render(lock_path, None, None, "environment"))
    pins = {d for d in document["dependencies"] if isinstance(d, str)}
    assert pins == {f"{p.name}={p.version}={p.build}" for p in lock.package if p.manager == "conda"}
    assert document["channels"][-1] == "nodefaults"
    with pytest.raises(UserError, match="no pip packages") as raised:
        render(lock_path, None, None, "pylock")
    assert "explicit or environment" in raised.value.hint
    unknown = run_cli("render", str(lock_path), "--format", "wheelhouse")
    assert unknown.returncode == 1 and "formats: explicit, requirements, pylock, environment" in unknown.stderr


@pytest.mark.parametrize(
    "choices, names, reasons",
    [
        (ImportOptions(), {"six", "iniconfig"}, ["`tool` 0.1 comes from git"]),
        (
            ImportOptions(extras=("fast",)),
            {"six", "iniconfig"},
            ["`orjson` 3.10.0 has an sdist only", "`tool` 0.1 comes from git"],
        ),
        (ImportOptions(dev=False), {"six"}, ["`tool` 0.1 comes from git"]),
    ],
)
def test_pylock_markers_extras_groups_and_what_cannot_come_over(
    tmp_path: Path, choices: ImportOptions, names: set[str], reasons: list[str]
) -> None:
    source = Path(__file__).parent / "fixtures" / "foreign" / "pylock.tiny.toml"
    _, lock = import_lock(source, "t", tmp_path / "t.yml", choices)
    for platform in ("linux-64", "linux-aarch64"):
        assert {p.name for p in lock.packages_for(platform)} == names  # colorama is win32 only
    skipped = lock.meta("skipped")
    assert all(f"linux-64: {reason}" in skipped for reason in reasons) and skipped.count("linux-64:") == len(reasons)
    with pytest.raises(UserError, match="has no extra gpu"):
        import_lock(source, "t", tmp_path / "t.yml", ImportOptions(extras=("gpu",)))


@pytest.mark.slow
def test_explicit_render_keeps_the_pip_lines_as_conda_lock_writes_them(tmp_path: Path) -> None:
    """conda-lock's own explicit render is the oracle: a lock of conda and pip packages gives the same `URL#md5`
    lines and the same `# pip NAME @ URL#sha256=…` lines (the pip part was dropped to a count), and lockgen's
    import reads the file back to the same pip entries."""
    from conda_lock.conda_lock import render_lockfile_for_platform
    from conda_lock.lockfile import parse_conda_lock_file

    from lockgen.adapters.lock.lockfile_yaml import dump_lock
    from lockgen.core.lock.lock_builder import resolved_lock

    examples = EXAMPLE_STACK.parent.parent
    conda = load_lock(examples / "pytorch-cuda" / "locks" / "cpu.conda-lock.yml")
    pip = [
        p
        for p in load_lock(examples / "quickstart" / "locks" / "cpu.conda-lock.yml").package
        if p.platform == "linux-64"
    ]
    mixed = resolved_lock(
        conda.metadata, tuple(conda.package) + tuple(pip)
    )  # through the builder: its package set recorded anew
    path = tmp_path / "mixed.conda-lock.yml"
    path.write_text(dump_lock(mixed))
    done = run_cli(
        "render", str(path), "--format", "explicit", "--platform", "linux-64", "-o", str(tmp_path / "explicit.txt")
    )
    assert done.returncode == 0, done.stderr
    ours = [
        line
        for line in (tmp_path / "explicit.txt").read_text().splitlines()
        if not line.startswith("# ") or line.startswith("# pip ")
    ]
    theirs = render_lockfile_for_platform(
        lockfile=parse_conda_lock_file(path),
        include_dev_dependencies=True,
        extras=None,
        kind="explicit",
        platform="linux-64",
        suppress_warning_for_pip_and_explicit=True,
    )
    theirs = [
        line.strip() for line in theirs if line.strip() and (not line.startswith("#") or line.startswith("# pip "))
    ]
    assert [line for line in ours if line.startswith("# pip ")] == [
        line for line in theirs if line.startswith("# pip ")
    ] and len(pip) == sum(line.startswith("# pip ") for line in ours)
    assert sorted(line for line in ours if not line.startswith("#")) == sorted(
        line for line in theirs if not line.startswith("#")
    )
    _, back = import_lock(tmp_path / "explicit.txt", "t", tmp_path / "back.yml", ImportOptions())
    assert {(p.name, p.url, p.hash.sha256) for p in back.package if p.manager == "pip"} == {
        (p.name, p.url, p.hash.sha256) for p in pip
    }
