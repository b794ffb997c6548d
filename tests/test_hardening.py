"""Inputs from many hands: a malformed signature, a FIFO in an environment, repeated lock entries, an
empty hash, a target name that is a path, a closed pipe. Each is one `error:` line (exit 1) or a quiet
end, never a traceback, a hang or a file written where it should not be."""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lockgen.adapters.lock.lockfile_yaml import load_lock
from lockgen.api.materialize import materialize
from lockgen.errors import LockFormatError
from tests.conftest import EXAMPLE_STACK, run_cli
from tests.test_export import make_lock

CPU_LOCK = EXAMPLE_STACK.parent / "locks" / "cpu.conda-lock.yml"


SIGNED = Path(__file__).resolve().parent.parent / "envs" / "examples" / "h200-system" / "h200-lock-quick.cert.json"


def _signed_certificate(tmp_path: Path) -> Path:
    copy = tmp_path / "c.cert.json"
    shutil.copy(SIGNED, copy)
    return copy


@pytest.mark.slow
@pytest.mark.parametrize(
    "signature", ['"just a string"', '{"algorithm": "ed25518", "key_id": "x", "value": "y"}', "[1]"]
)
def test_a_malformed_signature_is_refused_without_a_key(tmp_path: Path, signature: str) -> None:
    document = json.loads(_signed_certificate(tmp_path).read_text())
    document["signature"] = json.loads(signature)
    edited = tmp_path / "edited.cert.json"
    edited.write_text(json.dumps(document, sort_keys=True, indent=2, ensure_ascii=True) + "\n")
    result = run_cli("cert", "verify", str(edited))
    assert result.returncode == 1 and "signature is malformed" in result.stderr and "Traceback" not in result.stderr


def test_a_signed_certificate_never_passes_without_its_key(tmp_path: Path) -> None:
    result = run_cli("cert", "verify", str(_signed_certificate(tmp_path)))
    assert result.returncode == 1 and "no --key was given" in result.stderr and "hint: pass --key" in result.stderr
    signed = run_cli("cert", "verify", str(SIGNED), "--key", str(SIGNED.parent / "h200-signing.pub"))
    assert signed.returncode == 0 and "signature valid" in signed.stdout


@pytest.mark.slow
def test_an_unsigned_certificate_is_checked_for_form_and_consistency(tmp_path: Path) -> None:
    document = json.loads(_signed_certificate(tmp_path).read_text())
    document["signature"] = None
    unsigned = tmp_path / "unsigned.cert.json"
    unsigned.write_text(json.dumps(document, sort_keys=True, indent=2, ensure_ascii=True) + "\n")
    result = run_cli("cert", "verify", str(unsigned))
    assert result.returncode == 0 and "unsigned: only its form was checked" in result.stdout
    document["certificate"]["checks"][0]["passed"] = False  # "PASSED (1 failed checks)" is an edit, not a result
    unsigned.write_text(json.dumps(document, sort_keys=True, indent=2, ensure_ascii=True) + "\n")
    result = run_cli("cert", "verify", str(unsigned))
    assert result.returncode == 1 and "says passed=True while 1 of its checks failed" in result.stderr


@pytest.mark.slow
def test_a_fifo_in_an_environment_never_blocks_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    lock = make_lock(tmp_path, "1.0")
    prefix, _ = materialize(lock, None, tmp_path / "env", lambda _: None)
    (prefix / "lib" / "libfoo.txt").unlink()
    os.mkfifo(prefix / "lib" / "libfoo.txt")
    done = subprocess.run(
        [sys.executable, "-m", "lockgen", "check", "--prefix", str(prefix), "--full"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and "modified lib/libfoo.txt" in done.stdout
    proven = subprocess.run(
        [sys.executable, "-m", "lockgen", "check", "--lock", str(lock), "--prefix", str(prefix)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "LOCKGEN_HOME": str(tmp_path / "home")},
    )
    assert proven.returncode == 1 and "libfoo 1.0: modified lib/libfoo.txt" in proven.stdout


def test_repeated_lock_entries_and_empty_hashes_are_refused(tmp_path: Path) -> None:
    text = CPU_LOCK.read_text()
    first = text.index("- name:")
    entry = text[first : text.index("- name:", first + 1)]
    doubled = tmp_path / "doubled.conda-lock.yml"
    doubled.write_text(text + entry * 3)
    with pytest.raises(LockFormatError, match="twice"):
        load_lock(doubled)
    name = entry.split()[2]
    sha = next(p.hash.sha256 for p in load_lock(CPU_LOCK).package if p.name == name)
    empty = tmp_path / "empty.conda-lock.yml"
    empty.write_text(text.replace(f"sha256: {sha}", 'sha256: ""'))
    with pytest.raises(LockFormatError, match="empty sha256"):
        materialize(empty, "linux-64", tmp_path / "env", lambda _: None)


def test_a_target_name_that_is_a_path_writes_nothing(tmp_path: Path) -> None:
    source = Path(__file__).parent / "fixtures" / "foreign" / "tiny.pixi.lock"
    result = run_cli("import", str(source), "--target", "../../escaped", cwd=tmp_path)
    assert result.returncode == 1 and "is not a name" in result.stderr
    assert not list(tmp_path.parent.parent.glob("escaped*"))


def test_locks_are_written_readable_as_any_file(tmp_path: Path) -> None:
    source = Path(__file__).parent / "fixtures" / "foreign" / "tiny.pixi.lock"
    assert run_cli("import", str(source), "--target", "t", cwd=tmp_path).returncode == 0
    mode = stat.S_IMODE((tmp_path / "locks" / "t.conda-lock.yml").stat().st_mode)
    assert mode == 0o666 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.slow
def test_a_closed_pipe_ends_quietly() -> None:
    done = subprocess.run(
        f"{sys.executable} -m lockgen arch --json | head -c 1 > /dev/null; {sys.executable} -m lockgen arch sm90 "
        "--json | head -1 > /dev/null",
        shell=True,
        capture_output=True,
        text=True,
    )
    assert "Traceback" not in done.stderr and "error: unexpected" not in done.stderr, done.stderr


def test_an_image_cannot_point_a_check_at_the_host(tmp_path: Path) -> None:
    from lockgen.adapters.image.image_source import environment_in

    root = tmp_path / "root"
    (root / "opt").mkdir(parents=True)
    (root / "opt" / "up").symlink_to("/")
    for label in ("../../../../tmp", "relative/env", "/", "/opt/up/tmp"):
        with pytest.raises(LockFormatError):
            environment_in(root, label)
    with pytest.raises(LockFormatError, match="holds no environment"):  # its layers put nothing there
        environment_in(root, "/opt/env")
    (root / "opt" / "env").mkdir()
    assert environment_in(root, "/opt/env") == root / "opt" / "env"


@pytest.mark.slow
def test_an_interpreter_lying_about_its_prefix_is_refused(tmp_path: Path) -> None:
    liar = tmp_path / "python"
    liar.write_text(f"#!/bin/sh\necho {tmp_path / 'elsewhere'}\n")
    liar.chmod(0o755)
    lock = CPU_LOCK
    result = run_cli("check", "--lock", str(lock), "--python", str(liar))
    assert result.returncode == 1 and "is not in that environment's bin/" in result.stderr


def test_a_killed_fetch_leaves_nothing_that_lasts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A partial download whose writer is gone (untouched for a minute, held by nobody) is swept by the next
    fetch; one another live run holds is left alone; a materialize leaves no guard file behind."""
    import fcntl

    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    store = tmp_path / "home" / "pkgs"
    store.mkdir(parents=True)
    dead, live = store / ".fetch-dead", store / ".fetch-live"
    for leftover in (dead, live):
        leftover.write_bytes(b"\0" * 1024)
        os.utime(leftover, (1, 1))
    holder = open(live, "rb")
    fcntl.flock(holder, fcntl.LOCK_EX)  # another run still downloading
    try:
        lock = make_lock(tmp_path, "1.0")
        prefix, _ = materialize(lock, None, tmp_path / "env", lambda _: None)
        assert not dead.exists() and live.exists()
        assert not list(prefix.parent.glob(".env.lock"))
    finally:
        holder.close()


@pytest.mark.slow
@pytest.mark.parametrize(
    "arch, driver, hint",
    [
        ("H100", "550.54.15", 'hint: H100 is sm90: write arch = "sm90"'),
        ("a100", "550.54.15", 'hint: a100 is sm80: write arch = "sm80"'),
        ("sm90", "550", 'hint: write the full version `nvidia-smi` prints, e.g. driver = "550.54.15"'),
    ],
)
def test_the_hint_fixes_the_case(tmp_path: Path, arch: str, driver: str, hint: str) -> None:
    stack = tmp_path / "stack.toml"
    stack.write_text(
        '[stack]\nname = "a"\nchannels = ["conda-forge"]\n[dependencies]\npytorch = "*"\n[targets.x]\narch = '
        f'"{arch}"\ndriver = "{driver}"\n'
    )
    result = run_cli("resolve", str(stack))
    assert result.returncode == 1 and hint in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, kind",
    [("tiny.pixi.lock", "pixi.lock"), ("tiny.uv.lock", "uv.lock"), ("tiny.explicit.txt", "@EXPLICIT file")],
)
def test_a_foreign_lock_given_where_a_lockgen_lock_belongs_points_at_import(
    tmp_path: Path, name: str, kind: str
) -> None:
    source = Path(__file__).parent / "fixtures" / "foreign" / name
    for command in (["materialize", str(source), "--prefix", str(tmp_path / "p")], ["render", str(source)]):
        result = run_cli(*command)
        assert result.returncode == 1 and f"is a {kind}, not a lockgen lock" in result.stderr
        assert f"hint: convert it first: lockgen import {source} --target NAME" in result.stderr
    assert not (tmp_path / "p").exists()


@pytest.mark.slow
def test_a_misspelt_channel_alias_is_an_error_not_a_network_resolve(tmp_path: Path) -> None:
    stack = tmp_path / "stack.toml"
    stack.write_text(
        '[stack]\nname = "a"\nchannels = ["conda-forge"]\n[dependencies]\nzlib = "*"\n[targets.cpu]\narch = "cpu"\n'
    )
    result = run_cli("resolve", str(stack), "--channel-alias", f"conda-frge={tmp_path}")
    assert result.returncode == 1 and "--channel-alias `conda-frge` names no channel" in result.stderr
    assert "hint: did you mean `conda-forge`?" in result.stderr and not (tmp_path / "locks").exists()


@pytest.mark.slow
def test_a_long_tool_run_reports_progress_and_a_hung_one_is_killed(monkeypatch: pytest.MonkeyPatch) -> None:
    from lockgen.adapters import tool_runner
    from lockgen.errors import ToolFailedError

    monkeypatch.setattr(tool_runner, "HEARTBEAT_S", 0.1)
    beats: list[float] = []
    done = tool_runner.run_tool(["sh", "-c", "sleep 0.5; echo out; echo err >&2"], "waiting", heartbeat=beats.append)
    assert (done.stdout, done.stderr, done.returncode) == ("out\n", "err\n", 0)
    assert len(beats) >= 2 and beats == sorted(beats)
    started = time.monotonic()
    with pytest.raises(ToolFailedError, match="did not finish within"):
        tool_runner.run_tool(["sleep", "30"], "hanging", timeout_s=0.5)
    assert time.monotonic() - started < 5


def test_work_done_while_a_tool_runs_overlaps_it_and_a_failure_of_it_kills_the_tool(tmp_path: Path) -> None:
    from lockgen.adapters import tool_runner

    flag = tmp_path / "flag"
    seen: list[bool] = []  # the program waits for a file the work writes: done while it runs, not after
    done = tool_runner.run_tool(
        ["sh", "-c", f"while [ ! -e {flag} ]; do sleep 0.01; done; echo saw it"],
        "waiting",
        timeout_s=20,
        meanwhile=lambda: (seen.append(flag.exists()), flag.touch()),
    )
    assert (seen, done.stdout) == ([False], "saw it\n")
    pids = tmp_path / "pid"

    def failing() -> None:
        while not pids.exists():
            time.sleep(0.01)
        raise KeyError("the work failed")

    started = time.monotonic()
    with pytest.raises(KeyError):
        tool_runner.run_tool(
            ["sh", "-c", f"echo $$ > {pids}.tmp; mv {pids}.tmp {pids}; exec sleep 30"], "hanging", meanwhile=failing
        )
    assert time.monotonic() - started < 5
    with pytest.raises(ProcessLookupError):  # killed and reaped, not left running
        os.kill(int(pids.read_text()), 0)


def test_a_full_disk_is_the_machine_s_error_not_a_bug(capsys: pytest.CaptureFixture[str]) -> None:
    """ENOSPC (or a quota) anywhere in a command is one `error:` line naming the file, exit 1; any other
    unexpected OSError stays a bug (exit 3)."""
    import typer

    from lockgen.cli.ui import handles_errors

    def full() -> None:
        raise OSError(errno.ENOSPC, "No space left on device", "/data/home/layers/x.tar")

    def other() -> None:
        raise OSError(errno.EIO, "Input/output error")

    for command, code in ((full, 1), (other, 3)):
        with pytest.raises(typer.Exit) as exited:
            handles_errors(command)()
        assert exited.value.exit_code == code
    err = capsys.readouterr().err
    assert "error: the disk is full writing /data/home/layers/x.tar" in err and "Traceback" not in err
    assert "unexpected OSError" in err


@pytest.mark.parametrize(
    ("number", "said"),
    [
        (errno.EBUSY, "cannot be replaced (Device or resource busy): it is a mount point"),
        (errno.EXDEV, "cannot be replaced (Invalid cross-device link): it is a mount point"),
        (errno.EACCES, "is not permitted to this user (Permission denied)"),
    ],
)
def test_a_rename_refused_after_every_check_names_the_destination(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], number: int, said: str
) -> None:
    """The last step of an atomic write, the rename onto the destination, can be refused where no check before
    the work looks (EBUSY: a bind-mounted file; EACCES: another user's file in a sticky folder). Before: the error
    named the temporary file (`.c.prom.abcd1234.tmp`), removed by then; EBUSY and EXDEV were a bug (exit 3)."""
    import typer

    from lockgen.adapters.atomic_files import write_atomic
    from lockgen.cli.ui import handles_errors

    def refused(source: object, destination: object) -> None:
        raise OSError(number, os.strerror(number), str(source), None, str(destination))

    monkeypatch.setattr(os, "replace", refused)
    out = tmp_path / "c.prom"
    with pytest.raises(typer.Exit) as exited:
        handles_errors(lambda: write_atomic(out, "up 1\n"))()
    err = capsys.readouterr().err
    assert exited.value.exit_code == 1 and f"error: `{out}` {said}" in err and ".tmp" not in err, err
    assert "hint: " in err and "Traceback" not in err and list(tmp_path.iterdir()) == [], err


@pytest.mark.parametrize("prefix", ["/opt/../etc", "/", "opt/env", "/opt//env", "/opt/env/"])
def test_a_base_image_label_cannot_move_the_team_environment_out_of_a_folder(prefix: str) -> None:
    """A team export puts its environment at its base image's prefix label: only a plain absolute folder."""
    from lockgen.core.stack.team import team_prefix
    from lockgen.errors import LockFormatError
    from lockgen.model.lock import Lock, LockMetadata

    lock = Lock(
        metadata=LockMetadata(
            content_hash={},
            channels=(),
            platforms=("linux-64",),
            sources=(),
            custom_metadata={"lockgen.base-lock": "ab" * 32},
        ),
        package=(),
    )
    labels = {"dev.lockgen.lock.sha256": "ab" * 32, "dev.lockgen.prefix": prefix}
    with pytest.raises(LockFormatError, match="not a folder inside the image"):
        team_prefix(lock, {"config": {"Labels": labels}}, "/opt/env")
    assert (
        team_prefix(lock, {"config": {"Labels": {**labels, "dev.lockgen.prefix": "/opt/torch/.venv"}}}, "/opt/env")
        == "/opt/torch/.venv"
    )


def test_a_team_lock_without_services_is_refused_on_a_base_that_runs_them() -> None:
    """The base's launcher would stay under the team's layers (they delete nothing): refused, with the ways out."""
    from lockgen.api.steps.held_base_steps import refuse_leftover_services
    from lockgen.errors import UserError
    from lockgen.model.lock import Lock, LockMetadata

    def lock(meta: dict[str, str]) -> Lock:
        return Lock(
            metadata=LockMetadata(
                content_hash={}, channels=(), platforms=("linux-64",), sources=(), custom_metadata=meta
            ),
            package=(),
        )

    runs_services = {"config": {"Entrypoint": ["/opt/env/bin/python", "/opt/env/.lockgen/service_launcher.py"]}}
    with pytest.raises(UserError, match="base image runs \\[image\\] services"):
        refuse_leftover_services(lock({}), runs_services, "/opt/env")
    refuse_leftover_services(lock({}), {"config": {"Entrypoint": ["/bin/sh"]}}, "/opt/env")  # no services below: fine
    with_services = lock({"lockgen.image": '{"services": {"jupyter": ["jupyter", "lab"]}}'})
    refuse_leftover_services(with_services, runs_services, "/opt/env")


def test_the_one_file_hasher_follows_nothing_in_a_prefix_it_does_not_trust(tmp_path: Path) -> None:
    """`file_digest` is the only file hasher (parallel hashing and the rattler cache check call it); inside a
    prefix (`follow=False`) a link is not followed and a FIFO is refused at once instead of blocking the read."""
    import hashlib

    from lockgen.digests import file_digest

    data = b"x" * ((1 << 20) + 7)  # more than one block
    (tmp_path / "file").write_bytes(data)
    (tmp_path / "link").symlink_to(tmp_path / "file")
    os.mkfifo(tmp_path / "fifo")
    for follow in (True, False):
        assert file_digest(tmp_path / "file", follow=follow) == hashlib.sha256(data).hexdigest()
    assert file_digest(tmp_path / "file", "md5") == hashlib.md5(data).hexdigest()
    assert file_digest(tmp_path / "link") == hashlib.sha256(data).hexdigest()  # a path the user names: followed
    for unsafe in ("link", "fifo"):
        with pytest.raises(OSError):
            file_digest(tmp_path / unsafe, follow=False)


@pytest.mark.parametrize("files", [[["not", "an", "entry"]], [{"path": "bin/x", "type": "file"}], "files"])
def test_a_base_image_s_environment_manifest_of_the_wrong_shape_is_one_error(files: object) -> None:
    """A base image's environment manifest is bound to its label by its digest, but the base's maker writes both:
    one whose digest matches but whose entries are not entries is refused by name. Failed before: it was taken as
    typed, and the first entry read ended in a TypeError (exit 3)."""
    from lockgen.adapters.store import env_manifest
    from lockgen.api.steps.held_base_steps import _recorded_manifest
    from lockgen.errors import LockFormatError
    from lockgen.model.oci import ENVIRONMENT_LABEL, LOCK_LABEL

    digest = env_manifest.digest({"format": 1, "files": files})  # type: ignore[typeddict-item]
    recorded = {
        "format": 1,
        "files": files,
        "environment_digest": digest,
        "prefix": "/opt/env",
        "platform": "linux-64",
        "lock_sha256": "a" * 64,
    }
    config = {"config": {"Labels": {ENVIRONMENT_LABEL: f"sha256:{digest}", LOCK_LABEL: "a" * 64}}}
    found = {env_manifest.MANIFEST: json.dumps(recorded).encode()}
    with pytest.raises(LockFormatError, match="environment manifest is"):
        _recorded_manifest(found, config, "linux-64", "/opt/env")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("where", "value"), [("size", "1234"), ("size", 1234.0), ("size", True), ("schemaVersion", "2")]
)
def test_an_image_document_s_numbers_are_numbers(where: str, value: object) -> None:
    """A descriptor's size and a manifest's schemaVersion are JSON numbers (int64, as the image-spec says): text,
    a float or a bool there is refused when the image is checked. Failed before: the lax models took "1234" and
    1234.0, and the documents were then used as typed (a base's descriptors are copied into an exported
    manifest, so the text went on to be published)."""
    from lockgen.adapters.image.oci_layout import check_image
    from lockgen.errors import LockgenError

    layer = {"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": "sha256:" + "b" * 64, "size": 10}
    manifest: dict[str, object] = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": "sha256:" + "a" * 64, "size": 2},
        "layers": [layer],
    }
    config = {"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": ["sha256:" + "c" * 64]}}
    check_image("image", manifest, config)  # the honest one passes
    if where == "size":
        manifest["layers"] = [{**layer, "size": value}]
    else:
        manifest["schemaVersion"] = value
    with pytest.raises(LockgenError):
        check_image("image", manifest, config)
