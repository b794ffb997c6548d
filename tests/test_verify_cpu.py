"""`lockgen verify --arch cpu` end to end, as CI runs it: kernel -> certificate -> signature -> compare,
the multi-process path under torchrun (gloo), failing and hanging ranks, and tampering."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from typer.testing import CliRunner

from lockgen.cli.app import app
from tests.conftest import EXAMPLE_STACK, run_cli
from tests.open_audit import opened
from tests.torch_stack import torch_lock

pytestmark = [
    pytest.mark.slow,
    pytest.mark.xdist_group("verify_cpu"),
]  # its module fixtures are made once (pyproject: loadgroup)


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("keys")
    result = run_cli("keygen", "--out", str(folder / "k"))
    assert result.returncode == 0, result.stderr
    return folder / "k", folder / "k.pub"


@pytest.fixture(scope="module")
def conforming(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(python, lock): this host's torch locked and materialized, so the environment `verify --lock` runs in
    really is its lock, torch inside its prefix (no network: the index is pip's local wheels)."""
    folder = tmp_path_factory.mktemp("conforming")
    lock = torch_lock(folder)
    made = run_cli("materialize", str(lock), "--prefix", str(folder / "env"))
    assert made.returncode == 0, made.stderr
    return folder / "env" / "bin" / "python", lock


@pytest.fixture(scope="module")
def certificate(
    tmp_path_factory: pytest.TempPathFactory, keys: tuple[Path, Path], conforming: tuple[Path, Path]
) -> Path:
    out = tmp_path_factory.mktemp("cert") / "cpu.cert.json"
    python, lock = conforming
    result = run_cli(
        "verify",
        "--arch",
        "cpu",
        "--lock",
        str(lock),
        "--python",
        str(python),
        "--key",
        str(keys[0]),
        "--out",
        str(out),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(out)
    return out


def test_cpu_certificate_passes_and_records_the_run(certificate: Path) -> None:
    body = json.loads(certificate.read_text())["certificate"]
    assert body["passed"] and body["arch"] == "cpu" and body["mode"] == "full"
    names = {c["name"] for c in body["checks"]}
    assert {"gemm_fp32", "conv_forward", "sdpa_math", "fp32_loss_falls", "deterministic", "fingerprint"} <= names
    assert body["figures"]["gemm"]["fp32"]["unit"] == "TFLOP/s"
    assert body["subject"]["target"] == "cpu" and len(body["subject"]["lock_sha256"]) == 64
    assert body["subject"]["conformance"]["clean"] and body["subject"]["environment_digest"]
    assert body["figures"]["conv"]["fp32"]["cudnn"]["benchmark"] is True
    assert body["figures"]["graphs"]["bf16_replay_step_ms"]["reason"] == "CUDA graphs need a GPU"
    assert "need two or more" in body["figures"]["allreduce"]["collectives"]["reason"]
    phases = body["figures"]["phases"]  # every phase timed; together they are the run (startup included)
    assert {"startup", "torch_import", "gemm", "training", "determinism", "total"} <= set(phases)
    spent = sum(
        v["value"] for k, v in phases.items() if k not in ("total", "torch_import") and not k.startswith("training_")
    )
    assert abs(spent - phases["total"]["value"]) <= 0.5 + 0.05 * phases["total"]["value"]


def test_a_torch_imported_from_its_sources_every_run_is_named(tmp_path: Path) -> None:
    """An environment that keeps no byte code (the lent H100's sets PYTHONDONTWRITEBYTECODE=1: torch's import took
    3.2-3.8 s there, 1.3-1.7 s with its byte code kept) is named with the setting and what keeps it."""
    out = tmp_path / "cpu.cert.json"
    empty = tmp_path / "no-byte-code"  # torch's byte code looked for here, and not written
    result = run_cli(
        "verify", "--arch", "cpu", "--quick", "--out", str(out),
        env={"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": str(empty)},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    note = "no byte code kept: PYTHONDONTWRITEBYTECODE is set (or python -B); unset it, or set PYTHONPYCACHEPREFIX=DIR"
    assert re.search(r"note phases/torch_import \(\d+\.\d\d s\): compiled from its sources, " + re.escape(note),
                     result.stderr), result.stderr  # fmt: skip
    phases = json.loads(out.read_text())["certificate"]["figures"]["phases"]
    assert note in phases["torch_import"]["reason"] and not empty.exists()
    kept = tmp_path / "byte-code"  # written there by this run's import: the next run reads it
    result = run_cli(
        "verify", "--arch", "cpu", "--quick", "--out", str(out),
        env={"PYTHONDONTWRITEBYTECODE": "", "PYTHONPYCACHEPREFIX": str(kept)},
    )  # fmt: skip
    assert result.returncode == 0 and "note phases/torch_import" not in result.stderr, result.stderr
    assert "reason" not in json.loads(out.read_text())["certificate"]["figures"]["phases"]["torch_import"]
    assert list(kept.rglob("torch/__init__.*.pyc"))  # the prefix mirrors the source folders, no __pycache__


def test_the_fingerprint_is_signed_and_a_pinned_reference_judges_the_next_run(
    certificate: Path, conforming: tuple[Path, Path], tmp_path: Path
) -> None:
    """The certificate carries the CPU fingerprint under its key (the environment's digest among it); a
    reference of that key one digest off, pinned, fails the next run of the environment, naming the digest
    (the passing side: the H100 evidence's full-b.cert.json, pinned to node1-quick's)."""
    body = json.loads(certificate.read_text())["certificate"]
    numerics = body["numerics"]
    recorded = json.loads((conforming[0].parent.parent / ".lockgen" / "manifest.json").read_text())[
        "environment_digest"
    ]
    assert (
        numerics["key"]["environment_digest"] == recorded
        and numerics["key"]["work"] == "lockgen.numerics/1 cpu gemm 256"
    )
    assert next(c for c in body["checks"] if c["name"] == "fingerprint")["passed"]
    python, lock = conforming
    reference = tmp_path / "reference.json"
    reference.write_text(json.dumps([{**numerics, "digests": {**numerics["digests"], "gemm_fp32": "0" * 64}}]))
    other = run_cli(
        "verify",
        "--arch",
        "cpu",
        "--quick",
        "--lock",
        str(lock),
        "--python",
        str(python),
        "--expect-numerics",
        str(reference),
        "--out",
        str(tmp_path / "other.cert.json"),
    )
    assert (
        other.returncode == 1
        and "numerics/expected_fingerprint: digest gemm_fp32 differs from the reference" in other.stderr
    ), other.stderr
    assert "\n  FAIL numerics/expected_fingerprint: digest gemm_fp32 differs" in other.stderr, other.stderr


def test_every_check_counted_is_printed_the_pinned_fingerprint_s_too(tmp_path: Path) -> None:
    """With `--expect-numerics` the summary said `16 of 16 checks passed` over 15 `ok` lines: the checks lockgen
    judges after the kernel (the pinned fingerprint's) were never printed, so a failing one had no FAIL line."""
    first = tmp_path / "first.cert.json"
    assert run_cli("verify", "--arch", "cpu", "--quick", "--out", str(first)).returncode == 0
    again = run_cli(
        "verify", "--arch", "cpu", "--quick", "--expect-numerics", str(first), "--out", str(tmp_path / "b.cert.json")
    )
    assert again.returncode == 0, again.stderr
    printed = [line for line in again.stderr.splitlines() if line.startswith(("  ok   ", "  FAIL "))]
    counted = re.search(r"^(\d+) of (\d+) checks passed", again.stderr, re.MULTILINE)
    assert counted is not None and len(printed) == int(counted[2]) == int(counted[1]), again.stderr
    assert sum(line.startswith("  ok   numerics/expected_fingerprint: all ") for line in printed) == 1, printed


def test_one_environment_has_one_numerics_key_with_lock_or_without(
    certificate: Path, conforming: tuple[Path, Path], tmp_path: Path
) -> None:
    """Issue 48: `verify --lock L --python PY` and `verify --python PY` of one materialized prefix put its
    fingerprint under one key (the tree's digest, its manifest's), while each subject keeps its own digest: the
    lock's expected environment with --lock, the environment's record without. Before, the key took the subject's
    digest, so the node's two certificates fell under two keys and were never compared."""
    python, _ = conforming
    out = tmp_path / "bare.cert.json"
    bare = run_cli("verify", "--arch", "cpu", "--quick", "--python", str(python), "--out", str(out))
    assert bare.returncode == 0, bare.stderr
    with_lock, without = (json.loads(path.read_text())["certificate"] for path in (certificate, out))
    assert with_lock["numerics"]["key"] == without["numerics"]["key"]
    assert (
        with_lock["subject"]["environment_digest"]
        == with_lock["subject"]["conformance"]["expected_digest"]
        != without["subject"]["environment_digest"]
    )
    assert without["numerics"]["key"]["environment_digest"] == without["subject"]["environment_digest"]


def test_verify_reads_its_lock_and_expectations_once(conforming: tuple[Path, Path], tmp_path: Path) -> None:
    """The conformance, the expectations and the certificate's subject all take the one lock verify read (its
    entries and the sha256 of those bytes), and `--expect` is read once (issue 32; `tests/test_read_once.py`
    counts the other commands' reads the same way)."""
    python, lock = conforming
    expect = tmp_path / "expect.json"
    expect.write_text("{}")
    with opened(lock, expect) as counts:
        done = CliRunner().invoke(
            app,
            [
                "verify",
                "--arch",
                "cpu",
                "--quick",
                "--lock",
                str(lock),
                "--python",
                str(python),
                "--expect",
                str(expect),
                "--out",
                str(tmp_path / "once.cert.json"),
            ],
        )
    assert done.exit_code == 0, done.output
    assert dict(counts) == {str(lock): 1, str(expect): 1}
    assert (
        json.loads((tmp_path / "once.cert.json").read_text())["certificate"]["subject"]["lock_sha256"]
        == hashlib.sha256(lock.read_bytes()).hexdigest()
    )


def test_a_lock_the_environment_is_not_is_refused_before_the_kernel(tmp_path: Path) -> None:
    """The example's conda cpu lock is not this host's python: nothing is certified."""
    lock = EXAMPLE_STACK.parent / "locks" / "cpu.conda-lock.yml"
    result = run_cli("verify", "--arch", "cpu", "--quick", "--lock", str(lock), "--out", str(tmp_path / "x.cert.json"))
    assert result.returncode == 1 and result.stderr.startswith("error:") and "Traceback" not in result.stderr
    assert not (tmp_path / "x.cert.json").exists()


def test_signature_and_lock_binding(
    certificate: Path, keys: tuple[Path, Path], conforming: tuple[Path, Path], tmp_path: Path
) -> None:
    lock = conforming[1]
    ok = run_cli("cert", "verify", str(certificate), "--key", str(keys[1]), "--lock", str(lock))
    assert ok.returncode == 0 and "signature valid" in ok.stdout and "cpu on the CPU" in ok.stdout
    other_lock = run_cli(
        "cert",
        "verify",
        str(certificate),
        "--key",
        str(keys[1]),
        "--lock",
        str(EXAMPLE_STACK.parent / "locks" / "h100.conda-lock.yml"),
    )
    assert other_lock.returncode == 1 and "covers lock sha256" in other_lock.stderr
    other_key = tmp_path / "other"
    run_cli("keygen", "--out", str(other_key))
    wrong = run_cli("cert", "verify", str(certificate), "--key", f"{other_key}.pub")
    assert wrong.returncode == 1 and "signed by key" in wrong.stderr


@pytest.mark.parametrize(
    "edit",
    [
        lambda t: t.replace('"passed": true', '"passed": false', 1),
        lambda t: t.replace('"TFLOP/s"', '"TFLOP/S"', 1),
        lambda t: t + " ",
    ],
)
def test_any_changed_byte_is_refused(certificate: Path, keys: tuple[Path, Path], tmp_path: Path, edit) -> None:
    tampered = tmp_path / "tampered.cert.json"
    tampered.write_text(edit(certificate.read_text()))
    result = run_cli("cert", "verify", str(tampered), "--key", str(keys[1]))
    assert result.returncode == 1 and result.stderr.startswith("error:")


def test_the_certificate_is_signed_over_its_own_bytes(certificate: Path, keys: tuple[Path, Path]) -> None:
    """`verify --key` writes the canonical file signed over its own bytes up to the body's end (`"signed":
    "file-bytes"`), its frame exactly the one readers compare, its signature the key's over those bytes."""
    from lockgen.adapters.node import signing

    text = certificate.read_text()
    found = signing.framed(text.encode())
    assert signing.render(json.loads(text)) == text and json.loads(text)["signature"]["signed"] == "file-bytes"
    assert found is not None and signing.verifies(found, signing.public_key(keys[1]))


def test_compare_and_list(certificate: Path, tmp_path: Path) -> None:
    same = run_cli("cert", "compare", str(certificate), str(certificate))
    assert same.returncode == 0 and "gemm/fp32" in same.stdout and "REGRESSION" not in same.stdout
    listing = run_cli("certs", str(certificate.parent))
    assert listing.returncode == 0 and "cpu" in listing.stdout and "PASS" in listing.stdout
    assert " 0x" not in listing.stdout and " CPU " in listing.stdout


def test_two_processes_under_torchrun(tmp_path: Path) -> None:
    """Nothing of the run is left in the temporary folder (torchrun's agent made a `torchelastic_*` folder of
    its own there when given no --log-dir)."""
    out = tmp_path / "dist.cert.json"
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    result = run_cli(
        "verify", "--arch", "cpu", "--quick", "--gpus", "2", "--out", str(out), env={"TMPDIR": str(temporary)}
    )
    assert result.returncode == 0, result.stderr
    assert sorted(path.name for path in temporary.iterdir()) == []
    body = json.loads(out.read_text())["certificate"]
    names = {c["name"] for c in body["checks"]}
    assert {"allreduce_sum", "ddp_parameters_identical"} <= names
    assert set(body["figures"]["allreduce"]) == {"1MiB", "16MiB"}
    latency = body["figures"]["allreduce_latency"]
    assert set(latency) == {"8B", "64B", "512B", "4KiB", "32KiB", "256KiB"}
    assert all(entry["unit"] == "us" and entry["value"] > 0 for entry in latency.values())


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_two_nodes_meet_through_the_rendezvous(tmp_path: Path) -> None:
    """Two `lockgen verify` processes on this host stand in for two nodes of one process each."""
    port = _free_port()
    command = [
        sys.executable,
        "-m",
        "lockgen",
        "verify",
        "--arch",
        "cpu",
        "--quick",
        "--gpus",
        "1",
        "--nodes",
        "2",
        "--rendezvous",
        f"127.0.0.1:{port}",
        "--rendezvous-id",
        "two-nodes",
        "--timeout",
        "240",
    ]
    # one intra-op thread per stand-in node, as real nodes each have their own cores: two processes that each
    # spin a thread on every core of this host wait on each other (16.5 s for both nodes here, 7.9 s so)
    nodes = [
        subprocess.Popen(
            [*command, "--out", str(tmp_path / f"node{i}.cert.json")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "NO_COLOR": "1", "OMP_NUM_THREADS": "1"},
        )
        for i in range(2)
    ]
    finished = [node.communicate(timeout=300) for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], [err for _, err in finished]
    bodies = [json.loads((tmp_path / f"node{i}.cert.json").read_text())["certificate"] for i in range(2)]
    runs = [body["distributed"] for body in bodies]
    assert [(r["world_size"], r["nodes"], r["rendezvous"]) for r in runs] == [(2, 2, f"127.0.0.1:{port}")] * 2
    assert sorted(r["node_rank"] for r in runs) == [0, 1]
    for body in bodies:
        sums = [c for c in body["checks"] if c["name"] == "allreduce_sum"]
        assert len(sums) == 1 and sums[0]["passed"] and "sum over 2 ranks" in sums[0]["detail"]
    assert "one node of 2 meeting at 127.0.0.1" in finished[0][1]
    listing = run_cli("certs", str(tmp_path))
    assert listing.stdout.count("on 2 nodes PASS") == 2, listing.stdout


@pytest.mark.parametrize("torchrun_delay_s", [0, 12])
def test_a_node_whose_peers_never_come_fails_cleanly(tmp_path: Path, torchrun_delay_s: int) -> None:
    """--timeout 40: torchrun's join timeout is 32 s (80%, at least 10), leaving 8 s for torchrun to start and
    give up (about 1.4 s on an idle host); on a loaded host torchrun can start later than that, and lockgen's
    limit ends the wait first: the same diagnosis, with that limit (a torchrun started 12 s late shows it every
    time). The single-process kernel, which runs first under the same limit, takes 3 s on an idle host and up to
    15 s on two busy cores (a CI trial)."""
    port = _free_port()
    python = tmp_path / "python"  # this interpreter, its torchrun started `torchrun_delay_s` late
    python.write_text(
        f'#!/bin/sh\ncase " $* " in *" torch.distributed.run "*) sleep {torchrun_delay_s};; esac\nexec '
        f'{shlex.quote(sys.executable)} "$@"\n'
    )
    python.chmod(0o755)
    result = run_cli(
        "verify",
        "--arch",
        "cpu",
        "--quick",
        "--gpus",
        "1",
        "--nodes",
        "2",
        "--rendezvous",
        f"127.0.0.1:{port}",
        "--timeout",
        "40",
        "--python",
        str(python),
        "--out",
        str(tmp_path / "x.json"),
    )
    assert result.returncode == 1 and f"the other nodes did not join at 127.0.0.1:{port}" in result.stderr, (
        result.stderr
    )
    assert re.search(r"within (32|40) s" if torchrun_delay_s == 0 else r"within 40 s", result.stderr), result.stderr
    assert "hint: start the same command on every node" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "x.json").exists()


def test_several_nodes_need_a_rendezvous(tmp_path: Path) -> None:
    result = run_cli("verify", "--arch", "cpu", "--nodes", "2", "--out", str(tmp_path / "x.json"))
    assert result.returncode == 1 and "needs a rendezvous endpoint" in result.stderr and "hint:" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "x.json").exists()


@pytest.mark.parametrize(
    ("fault", "timeout", "message"),
    [
        ("VERIFY_FAULT_EXIT_RANK", "120", "rank 1 exited with code 17"),
        ("VERIFY_FAULT_HANG_RANK", "29", "the 2-process distributed kernel did not finish within 29 s"),
    ],
)
def test_a_failing_or_hanging_rank_fails_cleanly(
    tmp_path: Path, fault: str, timeout: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hang is killed at --timeout, and the message names the distributed run that hung. The single-process
    kernel runs first under the same limit: about 3 s alone here, over 10 s on a fresh venv beside the other
    test worker and up to 15 s on two busy cores (a CI trial beside another suite), so the limit is 29 s: below
    30 s, the distributed kernel's own collective timeout (max(30, 80% of it)), which would end the hung rank
    first and be reported as a rank's exit."""
    monkeypatch.setenv(fault, "1")
    mark = f"LOCKGEN_TEST_RUN={tmp_path}"  # every process this run starts inherits it: the leftovers are found by it
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    result = run_cli(
        "verify",
        "--arch",
        "cpu",
        "--quick",
        "--gpus",
        "2",
        "--timeout",
        timeout,
        "--out",
        str(tmp_path / "x.json"),
        env={"LOCKGEN_TEST_RUN": str(tmp_path), "TMPDIR": str(temporary)},
    )
    assert result.returncode == 1 and message in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "x.json").exists()
    assert _processes_marked(mark) == []
    assert sorted(path.name for path in temporary.iterdir()) == []  # the killed run's folders too


def _processes_marked(mark: str) -> list[str]:
    """The command lines of live processes whose environment holds `mark` (this run's own, whatever else runs)."""
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if mark.encode() in environ.read_bytes().split(b"\0"):
                found.append((environ.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


def test_gpu_arch_on_a_host_without_gpus_is_refused(tmp_path: Path) -> None:
    result = run_cli("verify", "--arch", "sm90", "--out", str(tmp_path / "x.json"))
    assert result.returncode == 1 and "no NVIDIA GPU" in result.stderr
    mismatch = run_cli(
        "verify", "--arch", "sm80", "--lock", str(EXAMPLE_STACK.parent / "locks" / "h100.conda-lock.yml")
    )
    assert mismatch.returncode == 1 and "lock is for sm90" in mismatch.stderr
