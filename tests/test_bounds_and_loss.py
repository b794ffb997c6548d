"""Untrusted input and lost work (issue 27): arguments that name nothing, leftovers of killed runs,
files never overwritten, downloads and registry calls bounded in size and time, values kept out of
shell scripts, certificates compared honestly, and the machine's refusals (read-only, no permission,
names too long) reported as the user's to fix."""

from __future__ import annotations

import contextlib
import errno
import gzip
import hashlib
import http.server
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer

from lockgen.adapters import http_fetch
from lockgen.adapters.node import signing
from lockgen.adapters.store import file_guard
from lockgen.adapters.image.layer_members import read_members
from lockgen.adapters.distribution.oci_distribution import Registry
from lockgen.api import resolve as api
from lockgen.api.export import export
from lockgen.model.requests import ExportRequest
from lockgen.api.materialize import materialize
from lockgen.api.store import gc, list_envs
from lockgen.cli.ui import handles_errors
from lockgen.core.image.image_reference import parse_reference
from lockgen.errors import HostError, LockFormatError, UserError
from lockgen.model.oci import LAYER_MEDIA_TYPES, LOCK_INSIDE
from tests.channel_factory import Pkg, build_channel
from tests.conftest import REPO, run_cli


def _one_error(result: subprocess.CompletedProcess[str], code: int = 1) -> str:
    """The single `error:` line of a refused command (with its `hint:`), no traceback."""
    assert result.returncode == code, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "hint:" in result.stderr and "Traceback" not in result.stderr, result.stderr
    return errors[0]


@pytest.fixture
def store_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A lock of a tiny real channel and its environment materialized in a temporary store."""
    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    channel = build_channel(tmp_path / "channel", [Pkg("libfoo", "1.0", files={"lib/libfoo.txt": "foo\n"})])
    stack = tmp_path / "stack" / "stack.toml"
    stack.parent.mkdir()
    stack.write_text(
        f'[stack]\nname = "tiny"\nchannels = ["{channel.as_uri()}"]\n[dependencies]\nlibfoo = '
        '"*"\n[targets.cpu]\narch = "cpu"\n'
    )
    api.resolve(stack)
    lock = stack.parent / "locks" / "cpu.conda-lock.yml"
    prefix, _ = materialize(lock, None, None, lambda _: None)
    return lock, prefix


@pytest.mark.slow
def test_gc_refuses_roots_that_name_no_lock(store_env: tuple[Path, Path], tmp_path: Path) -> None:
    lock, prefix = store_env
    empty = tmp_path / "empty"
    empty.mkdir()
    not_a_lock = tmp_path / "notes.txt"
    not_a_lock.write_text("hello\n")
    for root in (tmp_path / "lcoks", empty, not_a_lock):  # misspelt, holding no lock, not a lock
        line = _one_error(run_cli("gc", str(root)))
        assert str(root) in line
        assert prefix.is_dir() and [e.path for e in list_envs()] == [prefix]
    _one_error(run_cli("gc", str(lock.parent), str(tmp_path / "lcoks")))  # one bad root among good ones: refused
    assert prefix.is_dir()


@pytest.mark.slow
def test_gc_dry_run_lists_and_removes_nothing(store_env: tuple[Path, Path], tmp_path: Path) -> None:
    lock, prefix = store_env
    other = tmp_path / "other"
    other.mkdir()
    (other / "x.conda-lock.yml").write_text(lock.read_text() + "# another lock\n")
    kept = run_cli("gc", "--dry-run", str(lock))
    assert kept.returncode == 0 and kept.stdout == ""
    listed = run_cli("gc", "--dry-run", str(other))
    assert listed.returncode == 0 and listed.stdout.split() == [str(prefix)] and prefix.is_dir()
    removed = run_cli("gc", str(other))
    assert removed.returncode == 0 and removed.stdout.split() == [str(prefix)] and not prefix.exists()


@pytest.mark.slow
def test_gc_sweeps_what_a_killed_gc_left(store_env: tuple[Path, Path], tmp_path: Path) -> None:
    lock, prefix = store_env
    store = prefix.parent
    leftover = store / f".{prefix.name}.tmp-gc"  # what a gc killed between its rename and its delete leaves
    (leftover / "lib").mkdir(parents=True)
    (leftover / "lib" / "libfoo.txt").write_text("foo\n")
    (store / ".gc.lock").write_text("")  # its guard file too (the kernel released the flock when it died)
    assert gc([lock], dry_run=True) == [leftover] and leftover.is_dir()
    assert gc([lock], dry_run=False) == [leftover] and not leftover.exists() and prefix.is_dir()
    shutil.copytree(prefix, leftover)  # again, with the environment of that name still to remove
    other = tmp_path / "other.conda-lock.yml"
    other.write_text(lock.read_text() + "# another lock\n")
    result = run_cli("gc", str(other))
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.split()) == sorted([str(leftover), str(prefix)])
    assert not leftover.exists() and not prefix.exists()


@pytest.mark.slow
def test_gc_leaves_a_live_gc_alone(store_env: tuple[Path, Path], tmp_path: Path) -> None:
    """A gc holding the store's guard keeps a second gc waiting: its folders are never swept under it."""
    lock, prefix = store_env
    store = prefix.parent
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom pathlib import Path\n"
            "from lockgen.adapters.store import file_guard\n"
            "with file_guard.held(Path(sys.argv[1])):\n"
            "    Path(sys.argv[2]).mkdir(); print('held', flush=True); time.sleep(3)\n"
            "    Path(sys.argv[2]).rmdir()\n",
            str(store / ".gc.lock"),
            str(store / ".live.tmp-gc"),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    assert holder.stdout.readline().strip() == "held"
    second = run_cli("gc", str(lock))
    assert holder.wait(timeout=30) == 0  # its own folder was still there for it to remove: not swept under it
    assert second.returncode == 0 and second.stdout == "", second.stderr
    assert prefix.is_dir()


@pytest.mark.slow
@pytest.mark.parametrize("existing", ["K", "K.pub"])
def test_keygen_never_overwrites_a_key(tmp_path: Path, existing: str) -> None:
    kept = tmp_path / existing
    kept.write_text("the only copy\n")
    line = _one_error(run_cli("keygen", "--out", str(tmp_path / "K")))
    assert str(kept) in line
    assert kept.read_text() == "the only copy\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [existing]  # its partner was not written either
    made = run_cli("keygen", "--out", str(tmp_path / "fresh"))
    assert made.returncode == 0 and made.stdout.split() == [str(tmp_path / "fresh"), str(tmp_path / "fresh.pub")]
    assert (tmp_path / "fresh").stat().st_mode & 0o777 == 0o600


_HOLD_FOLDER = (
    "import fcntl, os, sys\nd = os.open(sys.argv[1], os.O_RDONLY)\nfcntl.flock(d, fcntl.LOCK_EX)\nprint('held', "
    "flush=True)\nsys.stdin.read()\n"
)


def test_export_sweeps_what_a_killed_export_left_and_nothing_a_live_one_holds(
    store_env: tuple[Path, Path], tmp_path: Path
) -> None:
    lock, _ = store_env
    out = tmp_path / "images" / "img"
    out.parent.mkdir()
    old = time.time() - 3600
    stale = out.parent / ".lockgen-export-killed"  # what an export killed mid-way leaves (83 MB in the report)
    (stale / "tree").mkdir(parents=True)
    (stale / "tree" / "libtorch.so").write_bytes(b"\0" * 4096)
    os.utime(stale, (old, old))
    young = out.parent / ".lockgen-export-starting"  # made a moment ago: an export between mkdtemp and its flock
    young.mkdir()
    live = out.parent / ".lockgen-export-live"  # an old folder another export is still working in
    live.mkdir()
    os.utime(live, (old, old))
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_FOLDER, str(live)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        ours: list[Path] = []

        def progress(_: str) -> None:  # while this export runs, its own folder is held against any sweep
            if not ours:
                ours.extend(p for p in out.parent.glob(".lockgen-export-*") if p not in (young, live))
                os.utime(ours[0], (old, old))
                assert file_guard.sweep_stale(out.parent, ".lockgen-export-*") == []

        export(ExportRequest(lock, out), progress)
    finally:
        holder.communicate("", timeout=10)
    assert len(ours) == 1 and not ours[0].exists() and (out / "oci-layout").is_file()
    assert not stale.exists() and young.is_dir() and live.is_dir()
    assert sorted(p.name for p in out.parent.iterdir()) == sorted(["img", young.name, live.name])


class _Hostile(http.server.BaseHTTPRequestHandler):
    """Answers every GET 200 with a body that never ends: `endless` sends 64 KiB blocks as fast as it can,
    `drip` one byte every 50 ms (never silent long enough for a socket timeout). Both loops are bounded
    (256 MiB, 30 s) and stop when the client leaves."""

    timeout = 2  # a connection that sends no request line (a TLS probe of `--insecure`) is dropped
    mode = "endless"

    def log_message(self, *_: object) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()
        block, pause, rounds = (b"\0" * 65536, 0.0, 4096) if self.mode == "endless" else (b"x", 0.05, 600)
        for _ in range(rounds):
            try:
                self.wfile.write(block)
                self.wfile.flush()
            except OSError:
                return
            time.sleep(pause)


@contextlib.contextmanager
def _hostile(mode: str) -> Iterator[str]:
    """A `_Hostile` server on 127.0.0.1; yields its base URL."""
    handler = type("Handler", (_Hostile,), {"mode": mode})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.mark.slow
def test_an_index_page_that_drips_or_never_ends_is_cut_off() -> None:
    with _hostile("drip") as url:
        started = time.monotonic()
        with pytest.raises(HostError, match="not finished within 1 s"):
            http_fetch.get(f"{url}/simple/torch/", {}, http_fetch.Meter(), timeout_s=1.0)
        assert time.monotonic() - started < 6  # not retried: a second drip would only cost as much again
    with _hostile("endless") as url, pytest.raises(UserError, match="larger than 1048576 bytes"):
        http_fetch.get(f"{url}/simple/torch/", {}, http_fetch.Meter(), limit=1 << 20)


def _lock_fetching_from(lock: Path, url: str, tmp_path: Path) -> Path:
    """The lock with its package's URL moved to `url` (same file name, same hash)."""
    text = lock.read_text()
    found = re.search(r"url: (file://\S+/)(libfoo-[^/\s]+)", text)
    assert found, text
    moved = tmp_path / "moved" / "cpu.conda-lock.yml"
    moved.parent.mkdir()
    moved.write_text(text.replace(found[1] + found[2], f"{url}/linux-64/{found[2]}"))
    return moved


@pytest.mark.slow
@pytest.mark.parametrize(
    "mode, env, said",
    [
        ("endless", {"LOCKGEN_MAX_DOWNLOAD_BYTES": "1000000"}, "larger than 1000000 bytes"),
        ("drip", {"LOCKGEN_TRANSFER_DEADLINE_S": "1.5"}, "not finished within 1.5 s"),
    ],
)
def test_a_package_download_is_bounded_in_size_and_time(
    store_env: tuple[Path, Path], tmp_path: Path, mode: str, env: dict[str, str], said: str
) -> None:
    lock, _ = store_env
    home = tmp_path / "fresh-home"  # an empty store: the archive must be fetched
    with _hostile(mode) as url:
        moved = _lock_fetching_from(lock, url, tmp_path)
        started = time.monotonic()
        result = run_cli("materialize", str(moved), env={"LOCKGEN_HOME": str(home), **env})
        assert time.monotonic() - started < 20
    assert said in _one_error(result)
    assert not list((home / "pkgs").glob(".fetch-*")) and not list((home / "envs").glob("*-cpu-*"))


@pytest.mark.slow
@pytest.mark.parametrize("value", ["lots", "-5", "0", "nan"])
def test_a_bad_download_limit_is_refused(store_env: tuple[Path, Path], tmp_path: Path, value: str) -> None:
    lock, _ = store_env
    with _hostile("endless") as url:
        result = run_cli(
            "materialize",
            str(_lock_fetching_from(lock, url, tmp_path)),
            env={"LOCKGEN_HOME": str(tmp_path / "fresh-home"), "LOCKGEN_MAX_DOWNLOAD_BYTES": value},
        )
    assert "LOCKGEN_MAX_DOWNLOAD_BYTES" in _one_error(result)


@pytest.mark.slow
def test_registry_calls_and_blob_streams_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    with _hostile("drip") as url:
        registry = Registry(parse_reference(f"docker://{url.removeprefix('http://')}/team/base:v1"), True, timeout_s=1)
        started = time.monotonic()
        with pytest.raises(HostError, match="not finished within 1 s"):
            registry.manifest("v1")
        monkeypatch.setenv("LOCKGEN_TRANSFER_DEADLINE_S", "1")
        with (
            pytest.raises(HostError, match="not finished within 1 s"),
            registry.blob_stream("sha256:" + "0" * 64) as stream,
        ):
            stream.verify()
        assert time.monotonic() - started < 15  # the TLS probe, then two deadlines
    with _hostile("endless") as url:
        registry = Registry(parse_reference(f"docker://{url.removeprefix('http://')}/team/base:v1"), True, timeout_s=5)
        with pytest.raises(UserError, match="more than 4 MiB"):
            registry.manifest("v1")  # past the distribution-spec's 4 MB
        monkeypatch.setenv("LOCKGEN_MAX_DOWNLOAD_BYTES", str(8 << 20))
        with (
            pytest.raises(UserError, match=f"larger than {8 << 20} bytes"),
            registry.blob_stream("sha256:" + "0" * 64) as stream,
        ):
            stream.verify()


def test_a_huge_lock_member_in_a_base_layer_is_refused_unread() -> None:
    """A base image's layer whose tar header claims a 3 GiB lock: refused from the header, never read whole."""
    header = tarfile.TarInfo("opt/env/.lockgen/lock.conda-lock.yml")
    header.size = 3 << 30
    layer = gzip.compress(header.tobuf(format=tarfile.PAX_FORMAT) + b"\0" * 4096)  # the rest is never sent
    descriptor = {"digest": "sha256:" + hashlib.sha256(layer).hexdigest(), "mediaType": LAYER_MEDIA_TYPES["gzip"]}
    with pytest.raises(LockFormatError, match=f"{3 << 30} bytes"):
        read_members(
            lambda _: io.BytesIO(layer),
            [descriptor],
            "/opt/env",
            lambda relative: relative == LOCK_INSIDE,
            lambda relative: False,
        )


def _slurm(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(
        "fleet",
        "slurm",
        "--arch",
        "cpu",
        "--nodes",
        "2",
        "--certs",
        str(tmp_path / "certs"),
        "--out",
        str(tmp_path / "slurm"),
        *args,
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "flag, value",
    [
        ("--partition", "gpu\nrm -rf /tmp/lockgen-pwned"),  # a newline ends the #SBATCH line: the rest runs as shell
        ("--partition", "gpu;rm -rf /tmp/lockgen-pwned"),
        ("--partition", "gpu #comment"),
        ("--time", "00:10:00\n#SBATCH --uid=0"),
        ("--constraint", "a100'"),
        ("--arch", "cpu\ntouch /tmp/lockgen-pwned"),
        ("--python", "/opt/env/bin/python\ntouch /tmp/lockgen-pwned"),
        ("--python", "/opt/$(touch /tmp/lockgen-pwned)/bin/python"),
        ("--python", "/opt/${HOME:-$(id)}/bin/python"),
        ("--lockgen", "lockgen\rtouch /tmp/lockgen-pwned"),
    ],
)
def test_fleet_slurm_refuses_values_a_script_cannot_carry(tmp_path: Path, flag: str, value: str) -> None:
    args = [flag, value] if flag == "--python" else [flag, value, "--python", "/opt/env/bin/python"]
    if flag == "--arch":
        args = ["--python", "/opt/env/bin/python"]
        result = run_cli(
            "fleet",
            "slurm",
            "--arch",
            value,
            "--nodes",
            "2",
            "--certs",
            str(tmp_path / "certs"),
            "--out",
            str(tmp_path / "slurm"),
            *args,
        )
    else:
        result = _slurm(tmp_path, *args)
    assert flag in _one_error(result)
    assert not (tmp_path / "slurm").exists()


@pytest.mark.slow
def test_fleet_slurm_quotes_what_a_shell_would_split(tmp_path: Path) -> None:
    """Values with spaces and shell metacharacters reach lockgen as one argument each; `$VARIABLES` are
    expanded by the node's shell; the scripts parse (`bash -n`) and run with a stand-in lockgen."""
    marker = tmp_path / "pwned"
    stand_in = tmp_path / "record-args.py"
    stand_in.write_text("import json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    python = f"/opt/my env;touch {marker}/$SLURMD_NODENAME/bin/python"
    result = _slurm(
        tmp_path,
        "--python",
        python,
        "--partition",
        "gpu,debug",
        "--constraint",
        "a100&nvlink",
        "--lockgen",
        f"{sys.executable} {stand_in}",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    written = json.loads(result.stdout)
    sbatch, health = Path(written["sbatch"]), Path(written["health"])
    for script in (sbatch, health):
        assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    assert "#SBATCH --partition=gpu,debug\n" in sbatch.read_text()
    assert "#SBATCH --constraint=a100&nvlink\n" in sbatch.read_text()
    ran = subprocess.run(
        ["bash", str(health)], capture_output=True, text=True, timeout=60, env={**os.environ, "SLURMD_NODENAME": "n1"}
    )
    assert ran.returncode == 0, (ran.stdout, ran.stderr)
    argv = json.loads((tmp_path / "certs" / "n1.health.log").read_text())
    assert argv[argv.index("--python") + 1] == f"/opt/my env;touch {marker}/n1/bin/python"
    assert not marker.exists()


H200 = REPO / "envs" / "examples" / "h200-system"


def _certificate(tmp_path: Path, name: str, edit=None, key: Path | None = None, signed_as: Path | None = None) -> Path:
    """The recorded full H200 certificate, its body edited by `edit`, then signed with `key`, or (with
    `signed_as`) keeping the signature of the unedited body, as an attacker editing figures would."""
    document = json.loads((H200 / "h200-full.cert.json").read_text())
    body = document["certificate"]
    if key is not None:
        document["signature"] = signing.sign(body, key)
    if signed_as is not None:
        document["signature"] = json.loads(signed_as.read_text())["signature"]
    if edit is not None:
        edit(body["figures"])
    if key is None and signed_as is None:
        document.pop("signature")
    path = tmp_path / f"{name}.cert.json"
    path.write_text(signing.render(document))
    return path


@pytest.mark.slow
def test_cert_compare_refuses_figures_that_are_not_finite_numbers(tmp_path: Path) -> None:
    good = _certificate(tmp_path, "good")
    for name, value in (("nan", float("nan")), ("inf", float("inf")), ("text", ""), ("true", True)):
        bad = _certificate(tmp_path, name, lambda figures, v=value: figures["gemm"]["bf16"].update(value=v))
        for first, second in ((good, bad), (bad, good)):
            line = _one_error(run_cli("cert", "compare", str(first), str(second)))
            assert "gemm/bf16" in line and str(bad) in line


@pytest.mark.slow
def test_cert_compare_reports_a_figure_that_disappeared(tmp_path: Path) -> None:
    good = _certificate(tmp_path, "good")
    gone = _certificate(tmp_path, "gone", lambda figures: figures["gemm"].pop("bf16"))
    result = run_cli("cert", "compare", str(good), str(gone))
    assert "gemm/bf16" in _one_error(result) and "missing from new" in result.stderr
    assert re.search(r"gemm/bf16 .* MISSING from new", result.stdout)
    back = run_cli("cert", "compare", str(gone), str(good), "--json")
    assert back.returncode == 1 and "missing from old" in back.stderr
    assert [r["name"] for r in json.loads(back.stdout)["figures"] if r["missing"]] == ["gemm/bf16"]
    same = run_cli("cert", "compare", str(good), str(good))
    assert same.returncode == 0 and "not checked" in same.stderr  # no --key: said plainly


@pytest.mark.slow
def test_cert_compare_checks_signatures_with_key(tmp_path: Path) -> None:
    key, other = tmp_path / "k", tmp_path / "other"
    signing.keygen(key)
    signing.keygen(other)
    pub = tmp_path / "k.pub"
    base = _certificate(tmp_path, "base", key=key)
    faster = lambda figures: figures["gemm"]["bf16"].update(value=figures["gemm"]["bf16"]["value"] * 2)  # noqa: E731
    edited = _certificate(tmp_path, "edited", faster, signed_as=base)  # the figures changed, the signature kept
    assert run_cli("cert", "compare", str(base), str(edited)).returncode == 0  # unchecked, it passes: hence --key
    assert "signature does not verify" in _one_error(
        run_cli("cert", "compare", str(base), str(edited), "--key", str(pub))
    )
    unsigned = _certificate(tmp_path, "unsigned")
    assert "not signed" in _one_error(run_cli("cert", "compare", str(base), str(unsigned), "--key", str(pub)))
    by_other = _certificate(tmp_path, "by-other", key=other)
    assert "no --key given" in _one_error(run_cli("cert", "compare", str(base), str(by_other), "--key", str(pub)))
    both = run_cli("cert", "compare", str(base), str(by_other), "--key", str(pub), "--key", str(tmp_path / "other.pub"))
    assert both.returncode == 0 and "not checked" not in both.stderr, both.stderr
    recorded = run_cli(
        "cert",
        "compare",
        str(H200 / "h200-full.cert.json"),
        str(H200 / "h200-full.cert.json"),
        "--key",
        str(H200 / "h200-signing.pub"),
    )
    assert recorded.returncode == 0 and "gemm/bf16" in recorded.stdout


@pytest.mark.slow
def test_cert_compare_survives_odd_and_deep_documents(tmp_path: Path) -> None:
    unitless = _certificate(tmp_path, "unitless", lambda figures: figures["gemm"]["bf16"].update(unit=""))
    assert run_cli("cert", "compare", str(unitless), str(unitless)).returncode == 0
    deep = tmp_path / "deep.cert.json"
    deep.write_text('{"certificate": ' + "[" * 200000 + "]" * 200000 + "}\n")
    _one_error(run_cli("cert", "compare", str(deep), str(unitless)))
    odd_unit = _certificate(tmp_path, "odd-unit", lambda figures: figures["gemm"]["bf16"].update(unit=7))
    assert "gemm/bf16" in _one_error(run_cli("cert", "compare", str(unitless), str(odd_unit)))


@pytest.mark.slow
def test_a_5000_character_path_is_the_users_to_fix(store_env: tuple[Path, Path], tmp_path: Path) -> None:
    lock, _ = store_env
    long = tmp_path / ("n" * 5000)
    for command in (
        ("keygen", "--out", str(long / "k")),
        ("export", str(lock), "--out", str(long / "img")),
        ("materialize", str(lock), "--prefix", str(long / "env")),
        ("keygen", "--out", str(long)),
    ):
        line = _one_error(run_cli(*command))
        assert "too long" in line and "5" in line and len(line) < 400, line
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["home", "channel", "stack"])


@pytest.mark.parametrize(
    "code", [errno.EROFS, errno.EACCES, errno.EPERM, errno.ENAMETOOLONG, errno.EEXIST, errno.ENOTDIR, errno.ELOOP]
)
def test_the_machine_refusing_a_path_is_a_user_error(code: int, capsys: pytest.CaptureFixture[str]) -> None:
    """As a read-only LOCKGEN_HOME or --out, or a folder this user may not write, raise them (root passes
    chmod 0555, so the errors are raised here as the kernel raises them)."""

    def writes() -> None:
        raise OSError(code, os.strerror(code), "/srv/lockgen-home/envs/.x.tmp-1")

    with pytest.raises(typer.Exit) as ended:
        handles_errors(writes)()
    assert ended.value.exit_code == 1
    said = capsys.readouterr().err.splitlines()
    assert (
        len(said) == 2
        and said[0].startswith("error: `/srv/lockgen-home/envs/.x.tmp-1`")
        and said[1].startswith("hint:")
    )


@pytest.mark.slow
def test_a_file_url_that_never_ends_is_cut_off(store_env: tuple[Path, Path], tmp_path: Path) -> None:
    lock, _ = store_env
    text = lock.read_text()
    found = re.search(r"url: (file://\S+/libfoo-[^/\s]+)", text)
    assert found, text
    zero = tmp_path / "zero" / found[1].rsplit("/", 1)[1]  # the entry's archive name, an endless file behind it
    zero.parent.mkdir()
    zero.symlink_to("/dev/zero")
    endless = tmp_path / "endless.conda-lock.yml"
    endless.write_text(text.replace(found[1], zero.as_uri()))
    result = run_cli(
        "materialize",
        str(endless),
        env={
            "LOCKGEN_HOME": str(tmp_path / "fresh-home"),
            "LOCKGEN_MAX_DOWNLOAD_BYTES": "3000000",
            "LOCKGEN_FILE_ROOTS": f"{tmp_path}:/dev",
        },
    )  # /dev/zero: named
    assert "a character device, not a regular file" in _one_error(result)  # refused unread, not read to the cap
    zero.unlink()
    os.mkfifo(zero)  # a FIFO behind the URL: waited on forever before
    result = run_cli(
        "materialize",
        str(endless),
        env={"LOCKGEN_HOME": str(tmp_path / "fresh-home"), "LOCKGEN_FILE_ROOTS": str(tmp_path)},
    )
    assert "a FIFO, not a regular file" in _one_error(result)


def test_a_file_where_a_path_needs_a_folder_is_the_users_to_fix(tmp_path: Path) -> None:
    """`--out notes.txt/key` or a LOCKGEN_HOME that names a file: mkdir or open said FileExistsError or
    NotADirectoryError, which ended as exit 3 ('unexpected'; found by an attack battery)."""
    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n")
    lock = Path(__file__).resolve().parent.parent / "envs" / "examples" / "quickstart" / "locks"
    first_lock = sorted(lock.glob("*.conda-lock.yml"))[0]
    for command in (
        ("keygen", "--out", str(notes / "sub" / "k")),
        ("render", str(first_lock), "-o", str(notes / "sub" / "r.txt")),
    ):
        line = _one_error(run_cli(*command))
        assert str(notes) in line and "folder" in line, line
    assert notes.read_text() == "mine\n" and sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


@pytest.mark.slow
def test_input_past_the_readers_limits_is_one_error(tmp_path: Path) -> None:
    """A stack, lock or foreign lock nested past the TOML or YAML reader (RecursionError), or holding an integer
    past Python's 4,300 digits (ValueError), ended resolve, render, diff and import with exit 3 (found by an
    attack battery)."""
    deep, huge = "[" * 3000 + "]" * 3000, "9" * 5000
    stack_deep, stack_huge = tmp_path / "deep" / "stack.toml", tmp_path / "huge" / "stack.toml"
    for path, value in ((stack_deep, deep), (stack_huge, huge)):
        path.parent.mkdir()
        path.write_text(f'[stack]\nname = "x"\nlimits = {value}\n[targets.cpu]\narch = "cpu"\n')
        assert "not a stack" in _one_error(run_cli("resolve", str(path)))
        _one_error(run_cli("render", str(path)))  # a stack where a lock goes
    lock = tmp_path / "huge.conda-lock.yml"
    lock.write_text(f"version: 1\nmetadata: {{}}\npackage:\n- name: x\n  version: {huge}\n")
    for command in (("render", str(lock)), ("diff", str(lock), str(lock))):
        assert "is not a lock" in _one_error(run_cli(*command), 2 if command[0] == "diff" else 1)
    uv_lock = tmp_path / "uv.lock"
    uv_lock.write_text(
        'version = 1\nrequires-python = ">=3.11"\n\n[[package]]\nname = "x"\nversion = "1"\nsource = { '
        f'registry = "https://pypi.org/simple" }}\nodd = {deep}\n'
    )
    assert "nested deeper" in _one_error(run_cli("import", str(uv_lock), "-t", "cpu", "-o", str(tmp_path / "out.yml")))
    assert not (tmp_path / "out.yml").exists()


def test_a_figure_past_a_floats_range_and_a_key_not_ed25519_are_one_error(tmp_path: Path) -> None:
    """A figure of 10**400 (canonical JSON holds it) raised OverflowError in cert compare, and an RSA or EC key
    passed as --key failed in the fingerprint ('format is invalid with this key'): exit 3 both (found by an
    attack battery)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    huge = _certificate(tmp_path, "huge", lambda figures: figures["gemm"]["bf16"].update(value=10**400))
    assert "not a finite number" in _one_error(run_cli("cert", "compare", str(huge), str(huge)))
    key = ec.generate_private_key(ec.SECP256R1())
    (tmp_path / "ec.pub").write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    (tmp_path / "ec.pem").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    for private in (False, True):
        with pytest.raises(UserError, match="not Ed25519"):
            signing._load(tmp_path / ("ec.pem" if private else "ec.pub"), private)


def test_a_lock_url_whose_port_is_no_number_is_refused_on_reading(tmp_path: Path) -> None:
    """`https://files.pythonhosted.org:abc/…` passed the lock's checks and raised http.client.InvalidURL in
    pack's fetch (exit 3; found by an attack battery)."""
    quickstart = (
        Path(__file__).resolve().parent.parent / "envs" / "examples" / "quickstart" / "locks" / "cpu.conda-lock.yml"
    )
    lock = tmp_path / "port.conda-lock.yml"
    lock.write_text(
        quickstart.read_text().replace("https://files.pythonhosted.org/", "https://files.pythonhosted.org:abc/", 1)
    )
    assert "is not a URL" in _one_error(run_cli("render", str(lock)))


def test_gc_leaves_a_link_in_the_store_and_what_it_points_at(tmp_path: Path) -> None:
    """A symbolic link among the store's environments (lockgen never makes one) stopped gc with 'Cannot call
    rmtree on a symbolic link', a `.NAME.tmp-gc` link left behind and nothing else removed (found by an attack
    battery)."""
    home_dir = tmp_path / "home"
    envs = home_dir / "envs"
    elsewhere = tmp_path / "elsewhere"
    for folder in (envs / "aaaa-x-linux-64", elsewhere):
        (folder / ".lockgen").mkdir(parents=True)
        (folder / ".lockgen" / "manifest.json").write_text(
            json.dumps(
                {
                    "format": 1,
                    "files": [],
                    "lock_sha256": "0" * 64,
                    "environment_digest": "1" * 64,
                    "platform": "linux-64",
                }
            )
        )
    (envs / "bbbb-x-linux-64").symlink_to(elsewhere)
    keep = Path(__file__).resolve().parent.parent / "envs" / "examples" / "quickstart" / "locks" / "cpu.conda-lock.yml"
    result = run_cli("gc", str(keep), env={"LOCKGEN_HOME": str(home_dir)})
    assert result.returncode == 0, result.stderr
    assert (
        sorted(p.name for p in envs.iterdir()) == ["bbbb-x-linux-64"]
        and (elsewhere / ".lockgen" / "manifest.json").is_file()
    )


def test_a_lock_entry_of_a_platform_the_lock_does_not_list_is_refused(tmp_path: Path) -> None:
    """`platforms: []` over a lock's entries made render say 'the lock covers ' and nothing (found by an attack
    battery): an entry whose platform is not among metadata.platforms is refused on reading, naming it."""
    quickstart = (
        Path(__file__).resolve().parent.parent / "envs" / "examples" / "quickstart" / "locks" / "cpu.conda-lock.yml"
    )
    text = quickstart.read_text()
    assert "  platforms:\n  - linux-64\n" in text
    lock = tmp_path / "none.conda-lock.yml"
    lock.write_text(text.replace("  platforms:\n  - linux-64\n", "  platforms: []\n", 1))
    assert "is not among metadata.platforms" in _one_error(run_cli("render", str(lock)))


def test_an_exclude_newer_past_the_last_utc_year_is_refused_by_lockgen(tmp_path: Path) -> None:
    """`9999-12-31T23:59:59-23:59` is year 10000 in UTC: uv refused it with only "For more information, try
    '--help'" (found by an attack battery); the stack's reader names it and its line."""
    stack = tmp_path / "stack.toml"
    stack.write_text(
        '[stack]\nname = "x"\npython = "3.11"\nplatforms = ["linux-64"]\n[pypi-dependencies]\nsix = '
        '"*"\n[pypi-options]\nexclude-newer = "9999-12-31T23:59:59-23:59"\n[targets.cpu]\narch = "cpu"\n'
    )
    line = _one_error(run_cli("resolve", str(stack)))
    assert "exclude-newer `9999-12-31T23:59:59-23:59` is not a date" in line and ":8:" in line, line


def test_gc_removes_a_set_aside_link_and_a_damaged_environment(tmp_path: Path) -> None:
    """A `.NAME.tmp-gc` link an older gc left stopped every later gc ('Cannot call rmtree on a symbolic link'),
    and one damaged record stopped envs and gc whole (found by a review): the link goes (never what it points
    at), and an environment whose record is damaged is one no lock names, listed as such and removed."""
    home_dir = tmp_path / "home"
    envs = home_dir / "envs"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "mine.txt").write_text("kept\n")
    (envs / "zzzz-x-linux-64" / ".lockgen").mkdir(parents=True)
    (envs / "zzzz-x-linux-64" / ".lockgen" / "manifest.json").write_text('{"files": [')
    (envs / ".old-x-linux-64.tmp-gc").symlink_to(elsewhere)
    listed = run_cli("envs", env={"LOCKGEN_HOME": str(home_dir)})
    assert (
        listed.returncode == 0
        and "zzzz-x-linux-64" in listed.stdout + listed.stderr
        and "damaged" in listed.stdout + listed.stderr
    ), listed
    keep = Path(__file__).resolve().parent.parent / "envs" / "examples" / "quickstart" / "locks" / "cpu.conda-lock.yml"
    result = run_cli("gc", str(keep), env={"LOCKGEN_HOME": str(home_dir)})
    assert result.returncode == 0, result.stderr
    assert (
        sorted(p.name for p in envs.iterdir() if not p.name.startswith(".gc")) == []
        and (elsewhere / "mine.txt").read_text() == "kept\n"
    )
