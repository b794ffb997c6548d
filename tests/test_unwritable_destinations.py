"""A destination that takes no new file is found before the work, not after it (issue 44): every command that
writes (resolve, add, import, pin, freeze, export, pack, fleet slurm) refuses a folder it cannot write with exit 1, one
`error:` line naming the folder the user gave (never the temporary file the write would have made) and a `hint:`,
having solved, fetched and written nothing. The folders are made immutable with `chattr +i`, which binds root
too (the suite runs as root, who writes a chmod 0555 folder); a read-only mount refuses the same way (EROFS)."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lockgen.adapters.atomic_files import WRITABLE_HINT, check_writable
from lockgen.errors import UserError
from tests.channel_factory import Pkg, build_channel
from tests.conftest import run_cli
from tests.test_export import make_lock

REPO_EXAMPLE = (
    Path(__file__).resolve().parent.parent / "envs" / "examples" / "numerics-fingerprint" / "node1-quick.cert.json"
)

REFUSED = "takes no new file (Operation not permitted)"


def _chattr(flag: str, folder: Path) -> bool:
    chattr = shutil.which("chattr")
    return chattr is not None and subprocess.run([chattr, flag, str(folder)], capture_output=True).returncode == 0


@pytest.fixture
def immutable() -> Iterator[list[Path]]:
    """Folders made immutable by the test, made mutable again after it (so its temporary folder can go)."""
    made: list[Path] = []
    yield made
    for folder in made:
        _chattr("-i", folder)
        _chattr("-a", folder)


def _freeze(folder: Path, immutable: list[Path], flag: str = "+i") -> None:
    """`folder` (or file) marked immutable (`+a`: append-only) until the test ends. Where it cannot be, the test
    fails saying why, never skips: the suite runs as root (who writes a chmod 0555 folder, so no mode bit would
    do), on a file system that keeps these marks (ext4, xfs, btrfs; tmpfs since Linux 6.0)."""
    if not _chattr(flag, folder):
        pytest.fail(f"chattr {flag} {folder} failed: these tests need root on a file system with immutable files")
    immutable.append(folder)


def _refused(done: subprocess.CompletedProcess[str], folder: Path) -> str:
    """One `error:` line naming `folder`, a hint, exit 1, no traceback, no temporary file named."""
    assert done.returncode == 1, done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "hint: " in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert errors[0].startswith(f"error: `{folder}` {REFUSED}"), errors[0]
    assert ".tmp" not in done.stderr and ".lockgen-" not in done.stderr, done.stderr
    return done.stderr


def test_resolve_and_add_refuse_before_solving(tmp_path: Path, immutable: list[Path]) -> None:
    """Before: resolve solved ("resolved h100 for linux-64: 3 packages"), then named `.h100.conda-lock.yml.*.tmp`."""
    lock = make_lock(tmp_path, "1.0")
    stack, before = lock.parent.parent / "stack.toml", lock.read_bytes()
    stack.write_text(stack.read_text().replace('"==1.0"', '"==1.1"'))
    _freeze(lock.parent, immutable)
    said = _refused(run_cli("resolve", str(stack)), lock.parent)
    assert "the lock of target `h100`" in said and "resolving" not in said and "resolved" not in said, said
    assert lock.read_bytes() == before and sorted(p.name for p in lock.parent.iterdir()) == [lock.name]
    _freeze(stack.parent, immutable)  # add writes the stack itself: its folder is checked before the solve too
    said = _refused(run_cli("add", "cuda-version", "--stack", str(stack)), stack.parent)
    assert "resolving" not in said and "cuda-version" not in stack.read_text(), said


def test_export_pack_import_and_pin_refuse_before_their_work(tmp_path: Path, immutable: list[Path]) -> None:
    """Before: export built the image and pack fetched every artifact, then each named its temporary file."""
    lock = make_lock(tmp_path, "1.0")
    folder = tmp_path / "read-only"
    folder.mkdir()
    _freeze(folder, immutable)
    said = _refused(run_cli("export", str(lock), "--out", str(folder / "img")), folder)
    assert "--out" in said and "hashing" not in said and "linking" not in said, said
    deeper = run_cli("export", str(lock), "--out", str(folder / "new" / "img"))  # a folder export would make
    assert f"error: `{folder / 'new'}` cannot be made in `{folder}` (Operation not permitted)" in deeper.stderr
    said = _refused(run_cli("pack", str(lock), "--out", str(folder / "p.tar")), folder)
    assert "fetch" not in said, said
    _refused(run_cli("import", str(lock), "-t", "copy", "-o", str(folder / "copy.conda-lock.yml")), folder)
    _refused(run_cli("pin", str(tmp_path / "inventory.json.gz"), "-t", "x", "-o", str(folder / "x.yml")), folder)
    assert list(folder.iterdir()) == []


def test_freeze_refuses_before_reading_the_environment(tmp_path: Path, immutable: list[Path]) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "uv", "venv", "-q", "--python", sys.executable, str(venv)], check=True)
    folder = tmp_path / "read-only"
    folder.mkdir()
    _freeze(folder, immutable)
    python = str(venv / "bin" / "python")
    _refused(run_cli("freeze", "--python", python, "-t", "x", "-o", str(folder / "x.yml")), folder)
    _refused(run_cli("freeze", "--python", python, "--inventory", str(folder / "inventory.json.gz")), folder)
    assert list(folder.iterdir()) == []


def test_resolve_of_fresh_locks_in_a_read_only_folder_writes_nothing_and_passes(
    tmp_path: Path, immutable: list[Path]
) -> None:
    """A read-only checkout whose locks are up to date: resolve writes nothing, so it passes (`unchanged`), as it
    did before the locks' folder was checked first (the check refused it before solving)."""
    lock = make_lock(tmp_path, "1.0")
    stack, before = lock.parent.parent / "stack.toml", lock.read_bytes()
    _freeze(lock.parent, immutable)
    done = run_cli("resolve", str(stack))
    assert done.returncode == 0 and "unchanged" in done.stdout + done.stderr, done.stdout + done.stderr
    assert lock.read_bytes() == before and sorted(p.name for p in lock.parent.iterdir()) == [lock.name]
    build_channel(tmp_path / "channel", [Pkg("foo-data", "3.0", subdir="noarch", depends=("libfoo",))])
    said = _refused(run_cli("resolve", str(stack)), lock.parent)  # fresh by the stack, yet the solve moves it
    assert "the lock of target `h100`" in said and lock.read_bytes() == before, said


def test_an_existing_immutable_destination_is_found_before_the_work(tmp_path: Path, immutable: list[Path]) -> None:
    """The destination itself, not only its folder: an immutable lock file (its folder writable), an existing
    immutable --out layout of export, an immutable --out file of pack. Before: each was found after the work
    (resolve solved, export built, pack fetched), and named by the temporary file the write had made."""
    lock = make_lock(tmp_path, "1.0")
    stack, before = lock.parent.parent / "stack.toml", lock.read_bytes()
    stack.write_text(stack.read_text().replace('"==1.0"', '"==1.1"'))
    _freeze(lock, immutable)
    done = run_cli("resolve", str(stack))
    assert done.returncode == 1 and f"error: `{lock}` is marked immutable: the lock of target `h100`" in done.stderr
    assert "resolving" not in done.stderr and ".tmp" not in done.stderr and lock.read_bytes() == before
    layout = tmp_path / "img"
    layout.mkdir()
    _freeze(layout, immutable)
    said = _refused(run_cli("export", str(lock), "--out", str(layout)), layout)
    assert "hashing" not in said and "linking" not in said, said
    packed = tmp_path / "p.tar"
    packed.write_bytes(b"x")
    _freeze(packed, immutable)
    done = run_cli("pack", str(lock), "--out", str(packed))
    assert done.returncode == 1 and f"error: `{packed}` is marked immutable: --out {packed}" in done.stderr
    assert "fetch" not in done.stderr and ".tmp" not in done.stderr, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_an_append_only_folder_is_refused_and_nothing_is_left_in_it(tmp_path: Path, immutable: list[Path]) -> None:
    """`chattr +a`: a file can be made there but never removed or renamed over. Before, the probe's empty
    `.lockgen-writable-*` file stayed in the folder, and the write failed naming its own temporary file."""
    lock = make_lock(tmp_path, "1.0")
    folder = tmp_path / "append-only"
    folder.mkdir()
    _freeze(folder, immutable, "+a")
    done = run_cli("import", str(lock), "-t", "copy", "-o", str(folder / "copy.conda-lock.yml"))
    assert done.returncode == 1 and f"error: `{folder}` is marked append-only" in done.stderr, done.stderr
    assert "hint: " in done.stderr and ".tmp" not in done.stderr and ".lockgen-" not in done.stderr
    assert list(folder.iterdir()) == []


def test_render_manifests_and_materialize_refuse_before_their_work(tmp_path: Path, immutable: list[Path]) -> None:
    """Before: render --out and manifests --out named their temporary file, and materialize --prefix its build
    folder, after the work."""
    lock = make_lock(tmp_path, "1.0")
    folder = tmp_path / "read-only"
    folder.mkdir()
    _freeze(folder, immutable)
    said = _refused(run_cli("render", str(lock), "--out", str(folder / "x.txt")), folder)
    assert f"--out {folder / 'x.txt'}" in said, said
    said = _refused(run_cli("manifests", str(lock), "--out", str(folder / "m.json")), folder)
    assert "reading the manifests" not in said, said
    said = _refused(run_cli("materialize", str(lock), "--prefix", str(folder / "env")), folder)
    assert f"--prefix {folder / 'env'}" in said and "fetch" not in said and "link" not in said, said
    assert list(folder.iterdir()) == []


FLEET = {
    "slurm": ("fleet", "slurm", "--arch", "cpu", "--python", sys.executable, "--nodes", "2", "--quick"),
    "kubernetes": (
        *("fleet", "kubernetes", "--arch", "cpu", "--certs-claim", "c", "--image"),
        "docker://r.example/t@sha256:" + "5e" * 32,
        *("--lockgen-image", "r.example/l@sha256:" + "0f" * 32),
    ),
}


@pytest.mark.parametrize("engine", sorted(FLEET))
def test_fleet_refuses_its_out_folder_before_making_anything(
    tmp_path: Path, immutable: list[Path], engine: str
) -> None:
    """Before: slurm made the certificates' folder and kubernetes read the lock and rendered its manifests,
    then the write failed naming its temporary file."""
    folder, certs = tmp_path / "read-only", tmp_path / "certs"
    folder.mkdir()
    _freeze(folder, immutable)
    given = ("--certs", str(certs)) if engine == "slurm" else ("--lock", str(make_lock(tmp_path, "1.0")))
    for out in (folder, folder / "manifests"):  # the folder given, and one it would make
        said = _refused(run_cli(*FLEET[engine], *given, "--out", str(out)), folder)
        assert f"--out {out} cannot" in said and not certs.exists() and list(folder.iterdir()) == [], said


@pytest.mark.parametrize("kind", ["FIFO", "socket"])
def test_a_fifo_or_a_socket_is_never_replaced_by_a_file(tmp_path: Path, kind: str) -> None:
    """`verify --out FIFO` replaced the FIFO with a regular file (as root `--out /dev/full` replaced the device):
    the check refuses what is there and is neither a file nor a folder, through a link too, naming it as given. (The
    atomic write itself renames over one: in lockgen's own folders a FIFO where a record goes is damage a rename
    repairs, `test_wheel_links`; every destination a user names is checked first.) A folder keeps its meaning
    (export writes into one) unless the result is a file."""
    special = tmp_path / kind
    with socket.socket(socket.AF_UNIX) as listening:
        if kind == "FIFO":
            os.mkfifo(special)
        else:
            listening.bind(str(special))
        link = tmp_path / "link"
        link.symlink_to(special)
        for given in (special, link):
            with pytest.raises(UserError) as refused:
                check_writable(given, f"--out {given}", WRITABLE_HINT)
            assert refused.value.message == f"`{given}` is a {kind}, not a file: --out {given} cannot replace it"
            assert f"where the {kind} is" in refused.value.hint
        assert stat.S_IFMT(special.lstat().st_mode) == (stat.S_IFIFO if kind == "FIFO" else stat.S_IFSOCK)
        assert sorted(path.name for path in tmp_path.iterdir()) == sorted([kind, "link"])
    check_writable(tmp_path, f"--out {tmp_path}", WRITABLE_HINT)  # a folder, written into
    with pytest.raises(UserError, match=r"is a folder: --out .* cannot replace it"):
        check_writable(tmp_path, f"--out {tmp_path}", WRITABLE_HINT, file=True)


def test_verify_refuses_where_it_cannot_write_before_its_kernel(tmp_path: Path, immutable: list[Path]) -> None:
    """The certificate (`--out`, or by default the working folder) and every `--emit` file: before, the kernel ran
    its whole run, then the write failed naming lockgen's temporary file (`/sys/.x.json.gvyg22ke.tmp`), and with
    `--emit prom=OK,junit=UNWRITABLE` the certificate and the prom file were left written."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    _freeze(folder, immutable)
    quick = ("verify", "--arch", "cpu", "--quick")
    said = _refused(run_cli(*quick, cwd=folder), folder)
    assert f"the certificate {folder}/lockgen-cpu-" in said and "verifying" not in said, said
    said = _refused(run_cli(*quick, "--out", str(folder / "c.cert.json")), folder)
    assert f"--out {folder / 'c.cert.json'} cannot" in said and "verifying" not in said, said
    out, prom, junit = tmp_path / "c.cert.json", tmp_path / "c.prom", folder / "c.xml"
    said = _refused(run_cli(*quick, "--out", str(out), "--emit", f"prom={prom},junit={junit}"), folder)
    assert f"--emit junit={junit} cannot" in said and "verifying" not in said, said
    assert not out.exists() and not prom.exists() and list(folder.iterdir()) == []


def test_cert_export_and_a_fleet_page_never_replace_a_fifo(tmp_path: Path) -> None:
    """`cert export --out FIFO` and `fleet status --html FIFO` put a file where the FIFO was (the atomic write renames
    over what is there): both now refuse it before reading a certificate, naming it as given, the FIFO left."""
    fifo, certs = tmp_path / "fifo", tmp_path / "certs"
    os.mkfifo(fifo)
    certs.mkdir()
    shutil.copy(REPO_EXAMPLE, certs / "node1.cert.json")
    for command, flag in (
        (["cert", "export", str(certs / "node1.cert.json"), "-f", "prom"], "--out"),
        (["fleet", "status", str(certs)], "--html"),
    ):
        done = run_cli(*command, flag, str(fifo), env={"LOCKGEN_HOME": str(tmp_path / "home")})
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert f"error: `{fifo}` is a FIFO, not a file: {flag} {fifo} cannot replace it" in done.stderr, done.stderr
        assert stat.S_ISFIFO(fifo.lstat().st_mode)


FOLDER_REFUSED = {  # the command's arguments (`DEST`: the folder), and how its error line goes on after "is a folder"
    "pack": (("pack", "LOCK", "--out", "DEST"), ": --out DEST cannot replace it"),
    "manifests": (("manifests", "LOCK", "--out", "DEST"), ": --out DEST cannot replace it"),
    "render": (("render", "LOCK", "--out", "DEST"), ": --out DEST cannot replace it"),
    "import": (("import", "LOCK", "-t", "copy", "-o", "DEST"), ": the lock DEST cannot replace it"),
    "freeze": (("freeze", "--prefix", "env", "-t", "x", "-o", "DEST"), ": the lock DEST cannot replace it"),
    "inventory": (("freeze", "--python", "PYTHON", "--inventory", "DEST"), ": the inventory DEST cannot replace it"),
    "resolve": (("resolve", "stack-1.0/stack.toml"), ": the lock of target `h100` cannot replace it"),
    "pin": (("pin", "inventory.json.gz", "-t", "x", "-o", "DEST"), ""),
    "export": (("export", "LOCK", "--format", "oci-archive", "--out", "DEST"), "; oci-archive writes one file"),
}


@pytest.mark.parametrize("command", sorted(FOLDER_REFUSED))
def test_a_folder_where_one_file_goes_is_refused_before_the_work(tmp_path: Path, command: str) -> None:
    """Each command whose result is one file refuses an existing folder at its path first, naming it as given
    (relative here). Before: pack fetched every artifact, manifests read every manifest, freeze --inventory
    re-hashed every file, freeze and resolve read the environment or solved, import and render converted the lock:
    then the write refused the folder (and freeze --prefix said first that it found nothing to lock)."""
    lock = make_lock(tmp_path, "1.0")
    (tmp_path / "env" / "conda-meta").mkdir(parents=True)  # a conda environment with nothing installed
    args, rest = FOLDER_REFUSED[command]
    dest = lock.relative_to(tmp_path) if command == "resolve" else Path("dest")
    if command == "resolve":
        lock.unlink()
    if command == "inventory":
        python = tmp_path / "venv"
        subprocess.run([sys.executable, "-m", "uv", "venv", "-q", "--python", sys.executable, str(python)], check=True)
        args = tuple(str(python / "bin" / "python") if arg == "PYTHON" else arg for arg in args)
    (tmp_path / dest).mkdir()
    (tmp_path / dest / "kept").write_text("kept\n")
    given = [str(lock) if arg == "LOCK" else str(dest) if arg == "DEST" else arg for arg in args]
    done = run_cli(*given, cwd=tmp_path, env={"LOCKGEN_HOME": str(tmp_path / "home")})
    assert done.returncode == 1 and "Traceback" not in done.stderr and "hint: " in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert errors == [f"error: `{dest}` is a folder" + rest.replace("DEST", str(dest))], done.stderr
    for work in ("fetch", "reading the manifests", "distributions in", "resolv", "hashing", "linking"):
        assert work not in done.stdout + done.stderr, done.stderr
    assert [path.name for path in (tmp_path / dest).iterdir()] == ["kept"]
