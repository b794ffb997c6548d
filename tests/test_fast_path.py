"""The fast path (`lockgen.cli.fast_path`, issue 43 "parse once per bytes"): `run`, `shell`, `activate` and
`materialize` of a lock whose checked value is kept and whose environment is made are answered before typer,
pydantic or the models are imported, and answer exactly as the typer app does (`LOCKGEN_REPARSE=1`: every byte
parsed again): the same stdout, stderr and exit code; a changed environment, a changed lock and a tampered kept
value are refused or parsed again as before, so no proof is lost."""

from __future__ import annotations

import re
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lockgen.adapters.lock import kept_inputs
from lockgen.adapters.proof.stat_walk import RACY_NS
from lockgen.api import resolve as api
from lockgen.cli.fast_path import _read, _suffix
from tests.channel_factory import Pkg, build_channel

REPO = Path(__file__).resolve().parent.parent
SLOW_ONLY = (
    "typer",
    "pydantic",
    "yaml",
    "rich",
    "lockgen.cli.app",
    "lockgen.model.lock",
    "lockgen.adapters.lock.lockfile_yaml",
)


@pytest.fixture(scope="module")
def lock(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A resolved one-target conda stack's lock: a program and a library."""
    root = tmp_path_factory.mktemp("fast-path")
    channel = build_channel(
        root / "channel",
        [
            Pkg("tool", "1.0", depends=("lib",), files={"bin/tool": "#!/bin/sh\necho tool\n"}),
            Pkg("lib", "1.0", files={"lib/lib.txt": "lib\n"}),
        ],
    )
    stack = root / "stack" / "stack.toml"
    stack.parent.mkdir()
    stack.write_text(
        f'[stack]\nname = "fast"\nchannels = ["{channel.as_uri()}"]\n[dependencies]\ntool = '
        '"*"\n[targets.cpu]\narch = "cpu"\n'
    )
    api.resolve(stack)
    return stack.parent / "locks" / "cpu.conda-lock.yml"


def _lockgen(
    *args: str,
    home: Path,
    reparse: bool = False,
    importtime: bool = False,
    no_site: bool = False,
    env_extra: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> tuple[int, str, str, str]:
    """A lockgen command's exit code, stdout, stderr and (with `importtime`) the modules lockgen's own process
    imported; `reparse`: with LOCKGEN_REPARSE=1, the typer app's answer; `no_site`: started by `python -S` (no
    site-packages, so nothing beyond the standard library can load, and no start-up hook imports anything);
    `cwd`: run in that folder (this checkout's lockgen still the one imported)."""
    env = {**os.environ, "NO_COLOR": "1", "LOCKGEN_HOME": str(home), "HOME": str(home.parent), **(env_extra or {})}
    env.pop("LOCKGEN_REPARSE", None)
    if reparse:
        env["LOCKGEN_REPARSE"] = "1"
    if no_site or cwd is not None:
        env["PYTHONPATH"] = str(REPO)
    flags = [*(["-X", "importtime"] if importtime else []), *(["-S"] if no_site else [])]
    done = subprocess.run(
        [sys.executable, *flags, "-m", "lockgen", *args], capture_output=True, text=True, env=env, cwd=cwd
    )
    imported = [line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")]
    said = "\n".join(line for line in done.stderr.splitlines() if not line.startswith("import time:"))
    return done.returncode, done.stdout, said, " ".join(imported)


def _made(lock: Path, home: Path, prefix: Path | None = None) -> None:
    """The lock's environment made (at `prefix`, else the store's), and a verdict kept of it (a tree changed
    within RACY_NS keeps none). One per home: another build linking the same package files moves their ctime."""
    line = ["materialize", str(lock), *(["--prefix", str(prefix)] if prefix else [])]
    assert _lockgen(*line, home=home)[0] == 0
    time.sleep(RACY_NS / 1e9 + 0.1)
    assert _lockgen(*line, home=home, reparse=True)[0] == 0


@pytest.mark.slow
def test_run_of_a_made_environment_imports_no_typer_pydantic_or_models(lock: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    command = ["run", str(lock), "--", "sh", "-c", 'echo "$CONDA_PREFIX"; tool; exit 5']
    first = _lockgen(*command, home=home)  # a fresh lock: parsed, kept, its environment made
    assert first[0] == 5 and first[1].endswith("\ntool\n")
    _made(lock, home)
    code, out, err, imported = _lockgen(*command, home=home, importtime=True)
    assert (code, out) == first[:2]
    assert [name for name in SLOW_ONLY if name in imported.split()] == []
    assert "lockgen.cli.fast_path" in imported.split()
    slow = _lockgen(*command, home=home, reparse=True, importtime=True)
    assert slow[:3] == (code, out, err)
    assert "typer" in slow[3].split() and "pydantic" in slow[3].split()  # the probe sees them where they load


BUILD_NEVER = ("typer", "rich", "yaml", "pydantic", "lockgen.model.base", "lockgen.adapters.lock.lockfile_yaml")


@pytest.mark.slow
def test_a_kept_lock_is_built_into_a_new_prefix_without_pydantic(lock: Path, tmp_path: Path) -> None:
    """A `materialize` of a kept lock into a prefix it has not made yet is built on the fast path from plain
    records (issue 43): the lock's kept value and the store's kept manifests are built again without a validator,
    so neither typer nor pydantic nor a pydantic-based model loads; the environment is whole."""
    home = tmp_path / "home"
    assert _lockgen("materialize", str(lock), "--prefix", str(tmp_path / "first"), home=home)[0] == 0
    second = tmp_path / "second"
    code, out, err, imported = _lockgen("materialize", str(lock), "--prefix", str(second), home=home, importtime=True)
    assert (code, out) == (0, f"{second}\n") and "environment digest sha256:" in err, err
    assert "lockgen.api.materialize" in imported.split()  # built, not found made
    assert [name for name in BUILD_NEVER if name in imported.split()] == []
    assert subprocess.run([second / "bin" / "tool"], capture_output=True, text=True).stdout == "tool\n"
    (kept,) = [path for path in (home / "kept").rglob("*.json") if json.loads(path.read_bytes())["kind"] == "lock"]
    record = json.loads(kept.read_bytes())
    record["value"]["lock"]["package"][0]["name"] = 7  # a kept value not of the records' shape: the lock parsed again
    kept.write_bytes(json.dumps(record).encode())
    third = _lockgen("materialize", str(lock), "--prefix", str(tmp_path / "third"), home=home, importtime=True)
    assert third[:2] == (0, f"{tmp_path / 'third'}\n") and "pydantic" in third[3].split()


KEPT_RUN_NEVER = (
    "_hashlib",  # OpenSSL's libcrypto, about 5 ms of each start: the interpreter's own SHA-256 does (stat_digest)
    "pathlib",
    "typing",
    "re",
    "json",
    "dataclasses",
    "tempfile",
    "subprocess",
    "lockgen.api.run",
    "lockgen.adapters.proof.conformance_store",
    "lockgen.adapters.lock.kept_inputs",
)


@pytest.mark.slow
def test_a_repeated_run_is_answered_by_its_kept_record_with_the_standard_library_alone(
    lock: Path, tmp_path: Path
) -> None:
    """The second `run` of a made environment keeps its record; the third is answered by it (`kept_runs`), with
    no pathlib, typing, re, json or dataclasses and none of the full fast path's modules, exactly as the typer app
    answers, a nonzero exit code and the environment's variables included."""
    home = tmp_path / "home"
    _made(lock, home)
    command = ["run", str(lock), "--", "sh", "-c", 'echo "$CONDA_PREFIX $CONDA_SHLVL $LOCKGEN_ENV_NAME"; tool; exit 7']
    second = _lockgen(*command, home=home, importtime=True)
    assert second[0] == 7 and "lockgen.api.run" in second[3].split()  # the full fast path, which keeps the record
    (record,) = (home / "kept").rglob("run/*")
    third = _lockgen(*command, home=home, importtime=True, no_site=True)
    assert [
        name for name in KEPT_RUN_NEVER if name in third[3].split()
    ] == [] and "lockgen.adapters.proof.kept_runs" in third[3].split(), third[3]
    assert third[:3] == second[:3] == _lockgen(*command, home=home, reparse=True)[:3]
    assert third[1].startswith(f"{second[2].split(' is already')[0]} 1 cpu\n") and third[1].endswith("tool\n")
    assert (home / "kept").rglob("run/*").__next__() == record


@pytest.mark.slow
def test_a_repeated_materialize_is_answered_by_the_same_record(lock: Path, tmp_path: Path) -> None:
    """A repeated `materialize` keeps the record too, and the next one (or a `run` of the same lock and options)
    stands on it with the standard library alone, printing what the typer app prints; `--json` goes the full
    fast path (it names the lock as pathlib does)."""
    home, prefix = tmp_path / "home", tmp_path / "env"
    _made(lock, home, prefix)
    command = ["materialize", str(lock), "--prefix", str(prefix)]
    second = _lockgen(*command, home=home, importtime=True)
    assert second[0] == 0 and "lockgen.api.materialize" in second[3].split()
    third = _lockgen(*command, home=home, importtime=True, no_site=True)
    assert [
        name for name in KEPT_RUN_NEVER if name in third[3].split()
    ] == [] and "lockgen.api.materialize" not in third[3].split(), third[3]
    assert third[:3] == second[:3] == _lockgen(*command, home=home, reparse=True)[:3]
    assert third[1] == f"{prefix}\n" and "environment digest sha256:" in third[2]
    run = _lockgen("run", str(lock), "--prefix", str(prefix), "--", "true", home=home, importtime=True, no_site=True)
    assert run[0] == 0 and "lockgen.api.run" not in run[3].split()
    as_json = _lockgen(*command, "--json", home=home, importtime=True)
    assert as_json[:3] == _lockgen(*command, "--json", home=home, reparse=True)[:3] and "json" in as_json[3].split()


@pytest.mark.slow
def test_a_fresh_stack_with_its_target_is_answered_before_typer_and_a_stale_one_as_before(
    lock: Path, tmp_path: Path
) -> None:
    """`run STACK --target T` (issue 43: stacks kept): the first run checks the stack's freshness through the
    typer app and keeps that verdict by the stack's and the lock's bytes; the next is answered by the fast path,
    as the typer app answers, for every freshness mode. A stack changed since (stale) goes the typer way again:
    refused under --locked exactly as before."""
    home = tmp_path / "home"
    stack = tmp_path / "stack"
    shutil.copytree(lock.parent.parent, stack)
    stack_file = stack / "stack.toml"
    _made(stack / "locks" / lock.name, home)
    command = ["run", str(stack_file), "--target", "cpu", "--", "sh", "-c", 'echo "$LOCKGEN_ENV_NAME"; tool; exit 4']
    first = _lockgen(*command, home=home, importtime=True)
    assert first[0] == 4 and "typer" in first[3].split()
    for mode in ([], ["--locked"], ["--frozen"]):
        line = [*command[:4], *mode, *command[4:]]
        fast = _lockgen(*line, home=home, importtime=True)
        assert [name for name in SLOW_ONLY if name in fast[3].split()] == [], (mode, fast)
        assert fast[:3] == first[:3] == _lockgen(*line, home=home, reparse=True)[:3]
    folder = _lockgen("run", str(stack), "-t", "cpu", "--", "true", home=home, importtime=True)  # the stack's folder
    assert folder[0] == 0 and "typer" not in folder[3].split()
    copy = tmp_path / "copy"  # the same bytes in another folder (a second checkout): its base, if any, is its own
    shutil.copytree(stack, copy)
    elsewhere = _lockgen(
        "run", str(copy / "stack.toml"), "--target", "cpu", "--locked", "--", "true", home=home, importtime=True
    )
    assert (
        elsewhere[0] == 0 and "typer" in elsewhere[3].split()
    )  # checked there, not taken from the first folder's verdict
    stack_file.write_text(stack_file.read_text().replace('tool = "*"', 'tool = ">=1"'))  # a request changed: stale
    stale = ["run", str(stack_file), "--target", "cpu", "--locked", "--", "true"]
    refused = _lockgen(*stale, home=home, importtime=True)
    assert refused[0] == 1 and "is stale" in refused[2] and "typer" in refused[3].split()
    assert refused[:3] == _lockgen(*stale, home=home, reparse=True)[:3]


@pytest.mark.slow
def test_a_detected_target_is_kept_by_the_stack_s_bytes_and_what_detection_read_of_the_node(
    lock: Path, tmp_path: Path
) -> None:
    """`run -- CMD` in a stack's folder (./stack.toml, no --target): the first run detects this node's target
    through the typer app and keeps it by the stack's path and bytes and what detection read (the facts file's
    bytes here, the probe's answers on a real node); the next is answered by the fast path, as the typer app
    answers. A node fact changed, or the stack changed, and the typer app detects (and checks freshness) again."""
    home = tmp_path / "home"
    stack = tmp_path / "stack"
    shutil.copytree(lock.parent.parent, stack)
    _made(stack / "locks" / lock.name, home)
    facts = tmp_path / "node.json"
    facts.write_text('{"platform": "linux-64", "glibc": "2.35"}')
    node = {"LOCKGEN_NODE_FACTS": str(facts)}
    command = ["run", "--", "sh", "-c", 'echo "$LOCKGEN_ENV_NAME"; tool; exit 4']

    def in_stack(*args: str, reparse: bool = False, **env: str) -> tuple[int, str, str, str]:
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "lockgen", *args],
            capture_output=True,
            text=True,
            cwd=stack,
            env={
                **{k: v for k, v in os.environ.items() if k != "LOCKGEN_REPARSE"},
                "PYTHONPATH": str(REPO),
                "NO_COLOR": "1",
                "LOCKGEN_HOME": str(home),
                "HOME": str(tmp_path),
                **({"LOCKGEN_REPARSE": "1"} if reparse else {}),
                **env,
            },
        )
        lines = done.stderr.splitlines()
        imported = [line.split("|")[-1].strip() for line in lines if line.startswith("import time:")]
        said = "\n".join(line for line in lines if not line.startswith("import time:"))
        return done.returncode, done.stdout, said, " ".join(imported)

    first = in_stack(*command, **node)
    assert first[0] == 4 and "is target cpu" in first[2] and "typer" in first[3].split()
    for line in (command, ["run", "stack.toml", "--", *command[2:]], ["run", "--locked", *command[1:]]):
        fast = in_stack(*line, **node)
        assert [name for name in SLOW_ONLY if name in fast[3].split()] == [], (line, fast)
        assert fast[:3] == first[:3] == in_stack(*line, reparse=True, **node)[:3]
    exports = in_stack("activate", "--shell", "bash", **node)  # activate (and shell) read the same kept answer
    assert exports[0] == 0 and "LOCKGEN_ENV_NAME" in exports[1] and "typer" not in exports[3].split()
    assert exports[:3] == in_stack("activate", "--shell", "bash", reparse=True, **node)[:3]
    probed = in_stack(*command)  # no facts file: this node probed (no GPU here), kept by the probe's answers
    assert probed[0] == 4 and "typer" in probed[3].split()
    assert "typer" not in in_stack(*command)[3].split()
    facts.write_text('{"platform": "linux-64", "glibc": "2.17"}')  # another node's facts
    other = in_stack(*command, **node)
    assert "typer" in other[3].split(), "a changed node fact was answered from the kept detection"
    assert other[:3] == in_stack(*command, reparse=True, **node)[:3]
    facts.write_text('{"platform": "linux-64", "glibc": "2.35"}')
    assert "typer" not in in_stack(*command, **node)[3].split()  # the first node's facts again: its kept answer
    (stack / "stack.toml").write_text((stack / "stack.toml").read_text().replace('tool = "*"', 'tool = ">=1"'))
    stale = in_stack("run", "--locked", *command[1:], **node)
    assert stale[0] == 1 and "is stale" in stale[2] and "typer" in stale[3].split()
    assert stale[:3] == in_stack("run", "--locked", *command[1:], reparse=True, **node)[:3]


@pytest.mark.slow
@pytest.mark.parametrize("linked", [False, True])
def test_a_stack_toml_folder_is_refused_by_the_fast_path_as_by_the_typer_app(
    lock: Path, tmp_path: Path, linked: bool
) -> None:
    """A review found `run -- CMD` (no source) answered from kept values in a folder whose `stack.toml` is itself
    a folder (or a link to one) holding a stack, which the typer app refuses: no stack.toml file here. The fast
    path answers only where `./stack.toml` is a regular file, so both refuse alike."""
    home = tmp_path / "home"
    project = tmp_path / "d1"
    held = project / ("held" if linked else "stack.toml")
    shutil.copytree(lock.parent.parent, held)
    if linked:
        (project / "stack.toml").symlink_to("held")
    _made(held / "locks" / lock.name, home)
    facts = tmp_path / "node.json"
    facts.write_text('{"platform": "linux-64", "glibc": "2.35"}')
    node = {"LOCKGEN_NODE_FACTS": str(facts)}
    for _ in range(2):  # the stack named: its detection and fresh verdict kept
        assert _lockgen("run", "stack.toml", "--", "true", home=home, env_extra=node, cwd=project)[0] == 0
    for line in (["run", "--", "sh", "-c", 'echo "$LOCKGEN_ENV_NAME"'], ["activate", "--shell", "bash"]):
        fast = _lockgen(*line, home=home, env_extra=node, cwd=project)
        assert fast[0] == 1 and "no stack.toml in this folder" in fast[2], (line, fast)
        assert fast[:3] == _lockgen(*line, home=home, env_extra=node, cwd=project, reparse=True)[:3]


def _fake_nvidia_smi(folder: Path) -> tuple[dict[str, str], Path]:
    """An `nvidia-smi` on PATH that logs each call's arguments and reports one H100: the environment to run with
    and the log."""
    log = folder / "nvidia-smi.log"
    program = folder / "bin" / "nvidia-smi"
    program.parent.mkdir(parents=True)
    program.write_text(
        f'#!/bin/sh\necho "$*" >> "{log}"\ncase "$1" in topo) printf "GPU0\\tX\\n";; '
        '*) echo "NVIDIA H100 80GB HBM3, 9.0, 570.1.1";; esac\n'
    )
    program.chmod(0o755)
    path = f"{program.parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return {"PATH": path}, log


def _calls(log: Path) -> list[str]:
    """The calls logged since the last look (the log emptied)."""
    calls = log.read_text().splitlines() if log.exists() else []
    log.unlink(missing_ok=True)
    return [call.split()[0] for call in calls]


@pytest.mark.slow
def test_detection_asks_nvidia_smi_once_and_only_when_a_kept_answer_could_use_it(
    lock: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A review found every fast-path miss on a GPU node running nvidia-smi four times (the fast path probed the
    node before anything cheaper, then the typer app probed again, each with `topo -m`, which detection never
    reads). Now the probe is one query, made by the fast path only once all else is found kept: a run with nothing
    kept, a stale stack and a team stack (whose detection is never kept) cost the typer app's one call; a kept
    answer costs one call and no typer."""
    monkeypatch.delenv("LOCKGEN_NODE_FACTS", raising=False)
    home = tmp_path / "home"
    stack = tmp_path / "stack"
    shutil.copytree(lock.parent.parent, stack)
    _made(stack / "locks" / lock.name, home)
    gpu, log = _fake_nvidia_smi(tmp_path)
    command = ["run", "--", "true"]
    first = _lockgen(*command, home=home, env_extra=gpu, cwd=stack, importtime=True)
    assert (
        first[0] == 0 and "typer" in first[3].split() and _calls(log) == ["--query-gpu=name,compute_cap,driver_version"]
    )
    kept = _lockgen(*command, home=home, env_extra=gpu, cwd=stack, importtime=True)
    assert kept[0] == 0 and "typer" not in kept[3].split(), kept
    assert _calls(log) == ["--query-gpu=name,compute_cap,driver_version"]
    (stack / "stack.toml").write_text((stack / "stack.toml").read_text().replace('tool = "*"', 'tool = ">=1"'))
    stale = _lockgen("run", "--frozen", "--", "true", home=home, env_extra=gpu, cwd=stack)
    assert stale[0] == 0 and _calls(log) == ["--query-gpu=name,compute_cap,driver_version"], stale
    team = tmp_path / "team"
    team.mkdir()
    (team / "stack.toml").write_text(
        '[stack]\nname = "team"\nextends = "../stack/stack.toml"\n[dependencies]\nlib = "*"\n'
    )
    api.resolve(team / "stack.toml")
    for _ in range(2):
        done = _lockgen(*command, home=home, env_extra=gpu, cwd=team)
        assert done[0] == 0 and _calls(log) == ["--query-gpu=name,compute_cap,driver_version"], done


@pytest.mark.slow
def test_a_kept_run_record_stands_only_while_its_whole_proof_does(lock: Path, tmp_path: Path) -> None:
    """Each part of the proof the record stands for, taken away, sends `run` the full way (which answers as the
    typer app): the drift verdict dropped, the stat trust window over, the record damaged, the lock's bytes
    changed, and the environment changed (refused, as before)."""
    home, prefix = tmp_path / "home", tmp_path / "env"
    _made(lock, home, prefix)
    command = ["run", str(lock), "--prefix", str(prefix), "--", "sh", "-c", "tool"]

    def kept_answer(**extra: str) -> bool:
        answer = _lockgen(*command, home=home, importtime=True, env_extra=extra)
        assert answer[:3] == _lockgen(*command, home=home, reparse=True, env_extra=extra)[:3]
        return "lockgen.api.run" not in answer[3].split()

    assert not kept_answer() and kept_answer()  # kept by the first, answered by it from the second on
    assert not kept_answer(LOCKGEN_STAT_TRUST_S="0")  # the window over: every byte read again, the full way
    (record,) = (home / "kept").rglob("run/*")
    record.write_bytes(b"\x00not a record")
    assert not kept_answer() and kept_answer()  # damaged: the full way, which keeps it again
    for verdict in (home / "conformance").glob("*.verdict.json"):
        verdict.unlink()
    assert not kept_answer()  # no verdict: the full path checks the tree again (and keeps a new verdict, then record)
    edited = tmp_path / "copy" / lock.name
    edited.parent.mkdir()
    edited.write_bytes(lock.read_bytes() + b"\n")  # other bytes: no record of them
    moved = ["run", str(edited), "--prefix", str(prefix), "--", "true"]
    assert "lockgen.api.run" in _lockgen(*moved, home=home, importtime=True)[3].split()
    time.sleep(RACY_NS / 1e9 + 0.1)
    _lockgen(*command, home=home)
    assert kept_answer()
    with (prefix / "lib" / "lib.txt").open("a") as changed:
        changed.write("changed\n")
    refused = _lockgen(*command, home=home)
    assert refused[0] == 1 and "changed since it was made (1 modified" in refused[2]
    assert refused[:3] == _lockgen(*command, home=home, reparse=True)[:3]


def _timeless(answer: tuple) -> tuple:
    """An answer with the times it names (when every byte was last read: `--full` reads them now) as `TIME`."""
    return tuple(
        re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "TIME", part) if isinstance(part, str) else part for part in answer
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ["materialize", "LOCK", "--prefix", "PREFIX"],
        ["materialize", "LOCK", "--prefix", "PREFIX", "--json"],
        ["materialize", "LOCK"],
        ["activate", "LOCK", "--shell", "fish"],
        ["activate", "LOCK", "--prefix", "PREFIX", "--shell", "bash"],
        ["activate", "LOCK", "--shell", "tcsh"],
        ["materialize", "LOCK", "--platform", "osx-arm64"],
        ["run", "LOCK", "--", "no-such-program-here"],
        ["run", "LOCK", "--platform", "linux-64", "--", "sh", "-c", "echo $PATH"],
        ["check", "--lock", "LOCK", "--prefix", "PREFIX", "--full"],
    ],
)
def test_the_fast_path_answers_as_the_typer_app(lock: Path, tmp_path: Path, args: list[str]) -> None:
    home, prefix = tmp_path / "home", tmp_path / "env"
    _made(lock, home, prefix if "PREFIX" in args else None)
    line = [str(lock) if a == "LOCK" else str(prefix) if a == "PREFIX" else a for a in args]
    fast = _lockgen(*line, home=home, importtime=True)
    assert _timeless(fast[:3]) == _timeless(_lockgen(*line, home=home, reparse=True)[:3])
    # errors and --full: the typer app's; but a build begun on the fast path words its own (a platform the lock
    # lacks), as the app would, so that it is never built twice
    answered = (fast[0] == 0 and "--full" not in args) or "no-such-program-here" in args or "osx-arm64" in args
    assert ("typer" not in fast[3].split()) == answered, fast


@pytest.mark.slow
def test_a_repeated_check_of_a_made_environment_answers_as_the_typer_app(lock: Path, tmp_path: Path) -> None:
    home, prefix = tmp_path / "home", tmp_path / "env"
    _made(lock, home, prefix)
    for json_flag in ([], ["--json"]):
        command = ["check", "--lock", str(lock), "--prefix", str(prefix), *json_flag]
        first = _lockgen(*command, home=home)  # the first check keeps its verdict
        assert first[0] == 0, first
        fast = _lockgen(*command, home=home, importtime=True)
        assert [name for name in SLOW_ONLY if name in fast[3].split()] == [] and "proven by their fingerprints" in fast[
            2
        ]
        assert fast[:3] == _lockgen(*command, home=home, reparse=True)[:3]
    (prefix / "lib" / "lib.txt").write_text("changed\n")
    command = ["check", "--lock", str(lock), "--prefix", str(prefix)]
    refused = _lockgen(*command, home=home, importtime=True)
    assert refused[0] == 1 and "is not the environment of" in refused[2] and "pydantic" in refused[3].split()


@pytest.mark.slow
def test_a_changed_environment_is_refused_as_before(lock: Path, tmp_path: Path) -> None:
    home, prefix = tmp_path / "home", tmp_path / "env"
    _made(lock, home, prefix)
    with (prefix / "lib" / "lib.txt").open("a") as changed:
        changed.write("changed\n")
    for command in (
        ["materialize", str(lock), "--prefix", str(prefix)],
        ["run", str(lock), "--prefix", str(prefix), "--", "true"],
    ):
        fast = _lockgen(*command, home=home)
        assert fast[0] == 1 and "changed since it was made (1 modified" in fast[2]
        assert fast[:3] == _lockgen(*command, home=home, reparse=True)[:3]


@pytest.mark.slow
def test_a_changed_lock_or_a_tampered_kept_value_is_parsed_again(lock: Path, tmp_path: Path) -> None:
    home, prefix = tmp_path / "home", tmp_path / "env"
    _made(lock, home, prefix)
    (kept,) = (home / "kept").rglob("*.json")
    command = ["run", str(lock), "--prefix", str(prefix), "--", "true"]  # the store's target names the activation
    record = json.loads(kept.read_bytes())
    for tampered in (
        b"{not json",
        json.dumps({**record, "sha256": "0" * 64}).encode(),
        json.dumps({**record, "value": {"target": 7}}).encode(),
    ):
        kept.write_bytes(tampered)
        code, _, _, imported = _lockgen(*command, home=home, importtime=True)
        assert code == 0 and "pydantic" in imported.split()  # parsed again, and kept again
        assert json.loads(kept.read_bytes()) == record
    edited = tmp_path / "edited.conda-lock.yml"
    edited.write_bytes(lock.read_bytes().replace(b"sha256: ", b"sha256: 0", 1))  # a lock changed by a byte: not kept
    command = ["run", str(edited), "--prefix", str(prefix), "--", "true"]
    fast = _lockgen(*command, home=home)
    assert fast[0] == 1 and "sha256" in fast[2]
    assert fast[:3] == _lockgen(*command, home=home, reparse=True)[:3]


def test_kept_values_are_bound_to_their_bytes_and_best_effort(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    kept_inputs.keep("lock", "a" * 64, lambda: {"target": "cpu", "platforms": ["linux-64"], "editable": False}, bool)
    assert kept_inputs.kept_lock("a" * 64) == kept_inputs.KeptLock("cpu", ("linux-64",), False)
    assert kept_inputs.kept_lock("b" * 64) is None and kept_inputs.kept("stack", "a" * 64) is None
    monkeypatch.setenv("LOCKGEN_REPARSE", "1")
    assert kept_inputs.kept_lock("a" * 64) is None
    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "a-file"))
    (tmp_path / "a-file").write_text("not a folder\n")
    kept_inputs.keep("lock", "c" * 64, lambda: {"target": "cpu", "platforms": []}, bool)  # nothing kept, no error


KEEP_AND_READ = """
import sys
from lockgen.adapters.lock import kept_inputs as kept

if sys.argv[1] == "keep":
    kept.keep("lock", "a" * 64, lambda: {"target": "cpu", "platforms": ["linux-64"], "editable": False}, bool)
    kept.keep_checked_text("b" * 64)
    kept.keep_fresh("c" * 64, "cpu", "d" * 64, [])
    kept.keep_detected("e" * 64, "node", "cpu", "said")
found = (kept.kept_lock("a" * 64), kept.kept_checked_text("b" * 64), kept.kept_fresh("c" * 64, "cpu", "d" * 64))
print([value not in (None, False) for value in found] + [kept.kept_detected("e" * 64) != {}])
"""


def test_a_value_kept_under_other_rules_is_not_taken(tmp_path: Path) -> None:
    """Every kind of kept input (a lock's checked value, a checked lock text, a stack's fresh verdict, a detection)
    names the rules it was made under: kept by a lockgen whose rules then change (one source file edited, the
    version string and the kept form unchanged), it is not taken, and is kept again under the new rules. Failed
    before: kept values were keyed by lockgen's version and a SCHEMA number, which an edit of the rules left as
    they were, so a value the old rules accepted was taken under the new ones."""
    tree = tmp_path / "tree"
    shutil.copytree(REPO / "lockgen", tree / "lockgen", ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "PYTHONPATH": str(tree), "LOCKGEN_HOME": str(tmp_path / "home")}
    env.pop("LOCKGEN_REPARSE", None)

    def kept_now(*words: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", KEEP_AND_READ, *words], env=env, cwd=tmp_path, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert kept_now("keep") == "[True, True, True, True]"
    assert kept_now("read") == "[True, True, True, True]"  # the same rules: taken
    rules = tree / "lockgen" / "core" / "lock" / "lock_fields.py"
    rules.write_text(rules.read_text() + "# a rule changed\n")
    assert kept_now("read") == "[False, False, False, False]"
    assert kept_now("keep") == "[True, True, True, True]"  # kept again, in place, under the new rules


def test_a_stack_keeps_the_detections_of_its_most_recent_nodes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Detection is kept by the stack alone (so a stack with nothing kept is known without probing the node), with
    each node's answer inside: the 16 most recent nodes (a home shared by unlike nodes), a node seen again the
    newest, a node's changed answer replacing its old one."""
    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    stack = "s" * 64
    assert kept_inputs.kept_detected(stack) == {}
    for number in range(17):
        kept_inputs.keep_detected(stack, f"node{number}", "gpu" if number % 2 else "cpu", f"said {number}")
    kept = kept_inputs.kept_detected(stack)
    assert list(kept) == [f"node{number}" for number in range(1, 17)] and kept["node16"] == ("cpu", "said 16")
    kept_inputs.keep_detected(stack, "node1", "cpu", "said again")
    kept_inputs.keep_detected(stack, "node17", "gpu", "said 17")
    kept = kept_inputs.kept_detected(stack)
    assert "node2" not in kept and list(kept)[-2:] == ["node1", "node17"] and kept["node1"] == ("cpu", "said again")
    assert kept_inputs.kept_detected("t" * 64) == {}


WORDS = st.sampled_from(
    [
        "a.yml",
        "b.yml",
        "stack.toml",
        "--prefix",
        "--platform",
        "-p",
        "--shell",
        "--json",
        "-v",
        "--help",
        "--target",
        "-t",
        "--locked",
        "--frozen",
        "",
        "-",
        "x",
    ]
)


@given(command=st.sampled_from(["run", "shell", "activate", "materialize"]), words=st.lists(WORDS, max_size=7))
def test_the_fast_path_reads_only_the_forms_it_knows(command: str, words: list[str]) -> None:
    """Accepted: one LOCK, or a STACK or none for run, shell and activate, and each option it knows once, its value
    the next word; else None."""
    read = _read(command, words)
    if read is None:
        return
    lock, options = read
    stack_options = {"--target", "-t", "--locked", "--frozen"} if command != "materialize" else set()
    known = (
        {"--prefix", "--platform", "-p"}
        | ({"--shell"} if command == "activate" else set())
        | ({"--json"} if command == "materialize" else set())
        | stack_options
    )
    rest = list(words)
    for flag in [w for w in words if w in known]:
        if flag in ("--json", "--locked", "--frozen"):
            rest.remove(flag)
            continue
        at = rest.index(flag)
        assert rest[at + 1] and not rest[at + 1].startswith("-")
        del rest[at : at + 2]
    assert rest == ([] if lock is None else [lock])
    if lock is None:  # ./stack.toml: only where no --prefix names an environment to use as it is
        assert command != "materialize" and "prefix" not in options
    elif Path(lock).suffix == ".toml":  # a stack: run, shell and activate alone take one
        assert command != "materialize"
    else:  # a lock never with a stack's options
        assert not {"target", "locked", "frozen"} & options.keys()
    assert not ("locked" in options and "frozen" in options)
    assert len(options) == len([w for w in words if w in known])


def test_an_unexpected_error_before_anything_is_said_goes_to_the_typer_app(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from lockgen.api import run as use_case
    from lockgen.cli import fast_path

    def broken(*_: object, **__: object) -> None:
        raise RuntimeError("a bug on the fast path")

    monkeypatch.setattr(use_case, "kept_activation", broken)
    lock = tmp_path / "x.conda-lock.yml"
    lock.write_text("version: 1\n")
    assert fast_path.answered(["run", str(lock), "--", "true"]) is None
    assert capsys.readouterr() == ("", "")

    def said_then_broken(_: object, progress: Callable[[str], None], **__: object) -> None:
        progress("found")
        raise RuntimeError("a bug after the environment was found")

    monkeypatch.setattr(use_case, "kept_activation", said_then_broken)
    assert fast_path.answered(["run", str(lock), "--", "true"]) == 3
    assert (
        capsys.readouterr().err
        == "found\nerror: unexpected RuntimeError: a bug after the environment was found\nhint: re-run with -v and "
        "report the traceback\n"
    )


@given(st.text(alphabet="/.ab", max_size=10))
def test_a_word_s_suffix_is_read_as_pathlib_reads_it(word: str) -> None:
    """`fast_path._suffix` (no pathlib: the kept `run`'s path) tells a stack's `.toml` as `Path.suffix` does."""
    assert _suffix(word) == Path(word).suffix


@pytest.fixture(scope="module")
def tool_channel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("resolve-channel")
    return build_channel(root / "channel", [Pkg("tool", "1.0", depends=("lib",)), Pkg("lib", "1.0")])


def _stack(folder: Path, channel: Path, dependency: str = "tool") -> Path:
    """A one-target conda stack in `folder` (each resolve its own: the first one writes its lock)."""
    folder.mkdir()
    stack = folder / "stack.toml"
    stack.write_text(
        f'[stack]\nname = "fast"\nchannels = ["{channel.as_uri()}"]\n[dependencies]\n{dependency} = "*"\n'
        '[targets.cpu]\narch = "cpu"\n'
    )
    return stack


def _placed(answer: tuple, folder: Path) -> tuple:
    """An answer with the stack's folder as `STACK` and each solve's seconds as `S`."""
    return tuple(
        re.sub(r"in \d+\.\d\ds", "in Ss", part.replace(str(folder), "STACK")) if isinstance(part, str) else part
        for part in answer
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("extra", "dependency"),
    [([], "tool"), (["--dry-run"], "tool"), (["--json"], "tool"), ([], "no-such-package")],
)
def test_resolve_is_answered_before_typer_as_the_typer_app(
    tool_channel: Path, tmp_path: Path, extra: list[str], dependency: str
) -> None:
    """`resolve STACK --target T` runs the use case without typer (issue 43 item 4) and says what the typer app
    says (`--target=T`, a form the fast path leaves to it): the same lines, lock, JSON, and error after progress."""
    fast_stack, typer_stack = (_stack(tmp_path / name, tool_channel, dependency) for name in ("fast", "typer"))
    fast = _lockgen("resolve", str(fast_stack), "--target", "cpu", *extra, home=tmp_path / "home", importtime=True)
    typer_app = _lockgen("resolve", str(typer_stack), "--target=cpu", *extra, home=tmp_path / "home", importtime=True)
    assert "typer" not in fast[3].split() and "typer" in typer_app[3].split()
    assert _placed(fast[:3], fast_stack.parent) == _placed(typer_app[:3], typer_stack.parent)
    assert fast[0] == (1 if dependency == "no-such-package" else 0), fast
    locks = [stack.parent / "locks" / "cpu.conda-lock.yml" for stack in (fast_stack, typer_stack)]
    assert [lock.is_file() for lock in locks] == ["--dry-run" not in extra and dependency == "tool"] * 2
    if locks[0].is_file():
        assert locks[0].read_bytes() == locks[1].read_bytes()


def test_a_resolve_that_fails_before_anything_is_said_goes_to_the_typer_app(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from lockgen.cli import fast_path

    stack = tmp_path / "stack.toml"
    stack.write_text("[stack\n")
    assert fast_path.answered(["resolve", str(stack)]) is None
    assert fast_path.answered(["resolve", str(tmp_path / "none.toml")]) is None
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize(
    "words",
    [
        ["--check"],
        ["--update", "tool"],
        ["--target=cpu"],
        ["-v"],
        ["a.toml", "b.toml"],
        ["--dry-run", "--dry-run"],
        ["--channel-alias"],
        ["--channel-alias", "--json"],
        ["-t", ""],
        ["--insecure"],
        [""],
    ],
)
def test_resolve_forms_the_fast_path_does_not_read_go_to_the_typer_app(words: list[str]) -> None:
    from lockgen.cli.fast_path import _read_resolve

    assert _read_resolve(words) is None


def test_resolve_forms_the_fast_path_reads() -> None:
    from lockgen.cli.fast_path import _read_resolve

    assert _read_resolve([]) == ("stack.toml", {"aliases": [], "targets": []}, set())
    assert _read_resolve(["--json", "s/stack.toml", "-t", "a", "--channel-alias", "c=d", "--target", "b"]) == (
        "s/stack.toml",
        {"aliases": ["c=d"], "targets": ["a", "b"]},
        {"--json"},
    )


def test_a_lock_text_is_checked_once_per_bytes(
    tool_channel: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A resolve that makes a lock text whose exact bytes passed every field's rule before does not check them
    again (`kept_inputs.keep_checked_text`); a refused text is never kept, other bytes are checked, and with
    LOCKGEN_REPARSE=1 every text is."""
    from lockgen.adapters.lock import lockfile_yaml
    from lockgen.errors import LockFieldError

    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("LOCKGEN_REPARSE", raising=False)
    checked: list[str] = []
    real = lockfile_yaml.check_lock

    def counted(lock: object, source: str) -> None:
        checked.append(source)
        real(lock, source)  # type: ignore[arg-type]

    monkeypatch.setattr(lockfile_yaml, "check_lock", counted)
    stack = _stack(tmp_path / "stack", tool_channel)
    api.resolve(stack)
    api.resolve(stack)
    assert len(checked) == 1
    other = _stack(tmp_path / "other", tool_channel, "lib")
    api.resolve(other)
    assert len(checked) == 2
    monkeypatch.setenv("LOCKGEN_REPARSE", "1")
    api.resolve(stack)
    assert len(checked) == 3
    monkeypatch.delenv("LOCKGEN_REPARSE")

    def refused(lock: object, source: str) -> None:
        checked.append(source)
        raise LockFieldError("a field breaks its rule", "")

    monkeypatch.setattr(lockfile_yaml, "check_lock", refused)
    third = _stack(tmp_path / "third", tool_channel, 'tool = "*"\nlib')
    for _ in range(2):  # refused both times: what failed was never kept
        with pytest.raises(LockFieldError):
            api.resolve(third)
    assert len(checked) == 5 and not (third.parent / "locks").exists()


def test_a_build_begun_on_the_fast_path_words_its_own_error_and_is_never_built_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A build of a kept lock on the fast path that fails is worded here, as the typer command words it, whether
    or not it said a line first: on a terminal its meter draws a bar and says no line, and handing such a failure
    to the typer app built (fetched, hashed, linked) everything a second time (review of loopfast: failed
    before, `answered` gave None after the bar). The reader of stdout leaving is no bug: it ends as the typer app
    ends it (`cli.main`, exit 0), not as exit 3."""
    import sys

    from lockgen.api import materialize as use_case
    from lockgen.cli import fast_path

    monkeypatch.setattr(use_case, "kept_materialized", lambda *_: None)
    monkeypatch.setattr(use_case, "kept_lock", lambda _: "bytes")
    builds: list[int] = []

    def broken(*_: object) -> None:
        builds.append(1)
        raise RuntimeError("a bug in the build")

    monkeypatch.setattr(use_case, "materialize_kept", broken)
    line = ["materialize", str(tmp_path / "x.conda-lock.yml"), "--prefix", str(tmp_path / "env")]
    monkeypatch.setenv("NO_COLOR", "1")
    assert fast_path.answered(line) == 3
    wording = "error: unexpected RuntimeError: a bug in the build\nhint: re-run with -v and report the traceback\n"
    assert capsys.readouterr() == ("", wording)

    def metered_then_broken(*args: object) -> None:
        meter = args[-1]
        assert callable(meter)
        builds.append(1)
        meter("fetch and check conda packages", 1, 2)
        raise RuntimeError("a bug in the build")

    monkeypatch.setattr(use_case, "materialize_kept", metered_then_broken)
    assert fast_path.answered(line) == 3
    assert capsys.readouterr() == ("", "fetch and check conda packages: 1/2\n" + wording)
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)  # a terminal: the meter draws a bar, says no line
    assert fast_path.answered(line) == 3 and len(builds) == 3

    def reader_left(*_: object) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(use_case, "kept_materialized", lambda *_: (tmp_path / "env", "0" * 64))
    monkeypatch.setattr(fast_path, "print_environment", reader_left)
    with pytest.raises(BrokenPipeError):  # `cli.main` ends it quietly, exit 1, as click ends the typer app's
        fast_path.answered(line)
