"""A conda environment's Python in the images export writes: a conda python is a dynamically linked ELF program
that the kernel starts with the dynamic loader its PT_INTERP names, which comes with glibc from a base. The
environment's `python` here is this host's Debian interpreter binary with its standard library under
`lib/python3.11` (a conda-forge python's layout), in a test conda package: on a base of this host's glibc
and the libraries it links (`tests/python_base.py`, no Python of its own) podman runs it from /opt/env;
without a base, or on a base without the loader, the export is refused with one `error:` and a `hint:`, and
writes nothing. A test channel's python that is a `#!/bin/sh` script is judged by its `#!` line the same
way, and an environment with no Python (libraries only) is exported as before."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from lockgen.api.steps import interpreter_steps
from lockgen.api.export import export
from lockgen.model.requests import ExportRequest, FromLock
from lockgen.errors import UserError
from tests.channel_factory import Pkg, build_channel, cpu_lock
from tests.conftest import run_cli
from tests.image_run import podman_run
from tests.python_base import PYTHON, host_python, python_base, stdlib_files
from tests.test_shallow_base import base_layout

TAG = "cpu-linux-64"
LOADER = "/lib64/ld-linux-x86-64.so.2"  # PT_INTERP of this host's x86_64 programs (readelf -l says so)


def _refused(done, out: Path) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    """The refusal's error and hint lines; nothing written."""
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    error, hint = done.stderr.splitlines()[-2:]
    assert error.startswith("error: ") and hint.startswith("hint: ") and not out.exists()
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".lockgen-export-")]
    return error, hint


def _lock(folder: Path, packages: list[Pkg], names: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    channel = build_channel(folder / "channel", packages)
    return cpu_lock(folder, channel.as_uri(), names)


@pytest.fixture(scope="module")
def conda_python_lock(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A lock of one conda `python`: this host's interpreter as `bin/python3.11` (`bin/python` links to it) and
    its standard library at `lib/python3.11`, where the interpreter finds it from its own path."""
    binary = host_python()
    stdlib = {f"lib/{path.relative_to('/usr/lib')}": path.read_bytes() for path in stdlib_files()}
    python = Pkg(
        "python",
        "3.11.0",
        links={"bin/python": f"python{PYTHON}"},
        files={f"bin/python{PYTHON}": binary.read_bytes(), **stdlib},
    )
    return _lock(tmp_path_factory.mktemp("conda-python"), [python], ["python"])


def test_a_conda_python_with_no_base_is_refused_naming_its_loader(tmp_path: Path, conda_python_lock: Path) -> None:
    out = tmp_path / "img"
    error, hint = _refused(run_cli("export", str(conda_python_lock), "--out", str(out)), out)
    assert error == (
        f"error: the environment's Python (/opt/env/bin/python{PYTHON}) is an ELF program that needs the dynamic "
        f"loader {LOADER}, and no --base image brings one: the image could not start its Python"
    )
    assert hint == (
        f"hint: pass --base an image with glibc >= 2.28 (the lock's lockgen.glibc) that has {LOADER}, e.g. "
        "docker://docker.io/library/debian:bookworm-slim"
    )
    no_loader = base_layout(
        tmp_path / "no-loader", {"amd64": [{"etc/os-release": b"ID=none\n", "lib64/other.so": b"x"}]}
    )
    error, _ = _refused(run_cli("export", str(conda_python_lock), "--base", str(no_loader), "--out", str(out)), out)
    assert error.endswith(
        f"needs the dynamic loader {LOADER}, and the base image has no file there: the image could not start its Python"
    )
    with pytest.raises(UserError, match="an image index takes no --base to bring one") as refused:
        export(ExportRequest(conda_python_lock, out, FromLock(("linux-64",), True)), lambda _: None)
    assert refused.value.hint.startswith("export --platform linux-64 alone and pass --base an image with glibc")
    assert not out.exists()


def test_an_existing_conda_environment_needs_its_loader_in_the_base(tmp_path: Path, conda_python_lock: Path) -> None:
    prefix = tmp_path / "env"
    assert run_cli("materialize", str(conda_python_lock), "--prefix", str(prefix)).returncode == 0
    out = tmp_path / "img"
    error, _ = _refused(run_cli("export", str(conda_python_lock), "--from-prefix", str(prefix), "--out", str(out)), out)
    assert f"is an ELF program that needs the dynamic loader {LOADER}, and no --base image brings one" in error
    base = python_base(tmp_path / "glibc", python=False)
    done = run_cli(
        "export", str(conda_python_lock), "--from-prefix", str(prefix), "--base", str(base), "--out", str(out)
    )
    assert done.returncode == 0, done.stderr
    assert f"needs the dynamic loader {LOADER}, a file of the image: it starts there" in done.stderr


@pytest.mark.slow
def test_a_conda_python_on_a_base_with_glibc_runs_under_podman(
    tmp_path: Path, conda_python_lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The oracle: podman starts the environment's own interpreter, whose prefix is /opt/env, on a base that
    brings only the loader and the C libraries (no Python of its own); and the image the refusal prevents (the
    proof left out) is one podman cannot start."""
    base = python_base(tmp_path / "glibc", python=False)
    out = tmp_path / "img"
    done = run_cli("export", str(conda_python_lock), "--base", str(base), "--out", str(out))
    assert done.returncode == 0, done.stderr
    ran = podman_run(out, TAG, "python", "-c", "import sys, json, sqlite3; print(sys.prefix, sys.executable)")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "/opt/env /opt/env/bin/python\n"
    checked = run_cli("check", "--image", str(out), "--lock", str(conda_python_lock))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    monkeypatch.setattr(interpreter_steps, "prove_python_starts", lambda *_, **__: None)
    export(ExportRequest(conda_python_lock, tmp_path / "unproven"), lambda _: None)
    ran = podman_run(tmp_path / "unproven", TAG, "python", "-c", "print('started')")
    assert ran.returncode != 0 and "started" not in ran.stdout and "no such file or directory" in ran.stderr, ran.stderr


@pytest.mark.slow
def test_a_script_python_is_judged_by_its_interpreter_line(tmp_path: Path) -> None:
    """A test channel's python that is a shell script runs where the image has /bin/sh: refused on no base,
    exported and run by podman on a base that has this host's /bin/sh."""
    script = '#!/bin/sh\necho "a script python of $0 says $*"\n'
    lock = _lock(tmp_path / "script", [Pkg("python", "3.11.0", files={"bin/python": script})], ["python"])
    out = tmp_path / "img"
    error, hint = _refused(run_cli("export", str(lock), "--out", str(out)), out)
    assert error == (
        "error: the environment's Python (/opt/env/bin/python) is a script run by /bin/sh (its #! line), and no "
        "--base image brings one: the image could not start its Python"
    )
    assert "that has /bin/sh, e.g. docker://docker.io/library/debian:bookworm-slim" in hint
    base = python_base(tmp_path / "sh", python=False, programs=(Path("/bin/sh"),))
    done = run_cli("export", str(lock), "--base", str(base), "--out", str(out))
    assert done.returncode == 0, done.stderr
    ran = podman_run(out, TAG, "python", "hello")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "a script python of /opt/env/bin/python says hello\n"


def test_a_chain_of_scripts_in_the_environment_is_followed_to_the_base(tmp_path: Path) -> None:
    """`bin/python` runs a script of the environment by its absolute image path, which runs /bin/sh: the last
    one is what the image must hold."""
    lock = _lock(
        tmp_path / "chain",
        [Pkg("python", "3.11.0", files={"bin/python": "#!/opt/env/libexec/run -x\n", "libexec/run": "#!/bin/sh\n"})],
        ["python"],
    )
    out = tmp_path / "img"
    error, _ = _refused(run_cli("export", str(lock), "--out", str(out)), out)
    assert error == (
        "error: the environment's Python (/opt/env/bin/python)'s interpreter /opt/env/libexec/run is a "
        "script run by /bin/sh (its #! line), and no --base image brings one: the image could not start "
        "its Python"
    )
    sh = base_layout(tmp_path / "sh", {"amd64": [{"bin/sh": b"a file the kernel would map"}]})
    done = run_cli("export", str(lock), "--base", str(sh), "--out", str(out))
    assert done.returncode == 0, done.stderr


def _elf(machine: int, interpreter: bytes) -> bytes:
    """A 64-bit little-endian ELF program of `machine` with one PT_INTERP header naming `interpreter`."""
    header = (
        b"\x7fELF\x02\x01\x01"
        + bytes(9)
        + struct.pack("<HHIQQQIHHHHHH", 3, machine, 1, 0, 64, 0, 0, 64, 56, 1, 0, 0, 0)
    )
    return (
        header
        + struct.pack("<IIQQQQQQ", 3, 4, 120, 0, 0, len(interpreter) + 1, len(interpreter) + 1, 1)
        + interpreter
        + b"\0"
    )


def test_a_python_for_another_machine_or_none_the_kernel_reads_is_refused(tmp_path: Path) -> None:
    wanted = {
        "python": (_elf(183, b"/lib/ld-linux-aarch64.so.1"), "is an ELF program for machine 183, not linux-64's (62)"),
        "python-cut": (b"\x7fELF cut short", "is an ELF file of no class or byte order the kernel reads"),
        "python-text": (b"print('no line')\n", "is neither an ELF program nor a script with a #! line"),
    }
    channel = build_channel(
        tmp_path / "channel", [Pkg(name, "3.11.0", files={"bin/python": data}) for name, (data, _) in wanted.items()]
    )
    out = tmp_path / "img"
    for name, (_, why) in wanted.items():
        (tmp_path / name).mkdir()
        lock = cpu_lock(tmp_path / name, channel.as_uri(), [name])
        error, _ = _refused(run_cli("export", str(lock), "--out", str(out)), out)
        assert (
            error
            == f"error: the environment's Python (/opt/env/bin/python) {why}: the image could not start its Python"
        )


def test_a_bin_python_that_leads_nowhere_is_refused(tmp_path: Path) -> None:
    lock = _lock(tmp_path / "dangling", [Pkg("python", "3.11.0", links={"bin/python": "python3.11"})], ["python"])
    out = tmp_path / "img"
    error, _ = _refused(run_cli("export", str(lock), "--out", str(out)), out)
    assert error == (
        "error: the environment's bin/python leads to /opt/env/bin/python3.11, and the image has no file there: "
        "it could not start its Python"
    )


def test_an_aarch64_python_needs_the_aarch64_loader_in_its_base(tmp_path: Path) -> None:
    """A linux-aarch64 environment (all conda, so built on this host) whose python names aarch64's loader: refused
    on an arm64 base without it, exported on one that has it at /lib (a link, as Debian's /lib -> usr/lib)."""
    python = Pkg(
        "python", "3.11.0", subdir="linux-aarch64", files={"bin/python": _elf(183, b"/lib/ld-linux-aarch64.so.1")}
    )
    channel = build_channel(tmp_path / "channel", [python])
    stack = tmp_path / "stack" / "stack.toml"
    stack.parent.mkdir()
    stack.write_text(
        f'[stack]\nname = "t"\nchannels = ["{channel.as_uri()}"]\nplatforms = '
        '["linux-aarch64"]\n[dependencies]\npython = "*"\n[targets.cpu]\narch = "cpu"\n'
    )
    assert run_cli("resolve", str(stack)).returncode == 0
    lock = stack.parent / "locks" / "cpu.conda-lock.yml"
    out = tmp_path / "img"
    bare = base_layout(tmp_path / "bare", {"arm64": [{"etc/os-release": b"ID=none\n"}]})
    error, _ = _refused(
        run_cli("export", str(lock), "--platform", "linux-aarch64", "--base", str(bare), "--out", str(out)), out
    )
    assert "needs the dynamic loader /lib/ld-linux-aarch64.so.1, and the base image has no file there" in error
    loader = base_layout(
        tmp_path / "loader", {"arm64": [{"usr/lib/ld-linux-aarch64.so.1": b"\x7fELF", "lib": "usr/lib"}]}
    )
    done = run_cli("export", str(lock), "--platform", "linux-aarch64", "--base", str(loader), "--out", str(out))
    assert done.returncode == 0, done.stderr


def test_an_environment_with_no_python_is_exported_on_no_base(tmp_path: Path) -> None:
    """Only libraries (a CUDA runtime's kind): nothing to start, nothing refused."""
    lock = _lock(
        tmp_path / "libs",
        [Pkg("cuda-cudart", "12.4.0", files={"lib/libcudart.so.12": b"\x7fELF libs"})],
        ["cuda-cudart"],
    )
    out = tmp_path / "img"
    done = run_cli("export", str(lock), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "the environment has no bin/python: no Python to start" in done.stderr
