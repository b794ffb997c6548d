"""`lockgen fleet slurm` on a real Slurm cluster the tests start (Debian's slurmctld, two slurmd as nodes n1
and n2, munge): one sbatch job certifies both nodes together through torchrun's rendezvous taken from
SLURM_*, and the health-check program drains a node whose environment is broken, with lockgen's reason."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.slurm_cluster import SlurmCluster, missing_tools

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    missing = missing_tools()
    if missing or os.geteuid() != 0:
        pytest.fail(
            f"the Slurm tests need root and {', '.join(missing) or 'Slurm'}: apt-get install slurm-wlm munge "
            "(the README's set-up line does)"
        )
    running = SlurmCluster(tmp_path_factory.mktemp("slurm")).start()
    yield running
    running.stop()


def scripts(tmp_path: Path, python: str, *extra: str) -> tuple[Path, Path, Path]:
    key = tmp_path / "key"
    assert run_cli("keygen", "--out", str(key)).returncode == 0
    certs = tmp_path / "certs"
    done = run_cli(
        "fleet",
        "slurm",
        "--arch",
        "cpu",
        "--python",
        python,
        "--nodes",
        "2",
        "--gpus-per-node",
        "1",
        "--quick",
        "--key",
        str(key),
        "--certs",
        str(certs),
        "--out",
        str(tmp_path / "slurm"),
        "--time",
        "00:10:00",
        "--timeout",
        "240",
        "--json",
        *extra,
    )
    assert done.returncode == 0, done.stderr
    written = json.loads(done.stdout)
    return Path(written["sbatch"]), Path(written["health"]), certs


def test_one_job_certifies_two_nodes_together(tmp_path: Path, cluster: SlurmCluster) -> None:
    sbatch, _, certs = scripts(tmp_path, sys.executable)
    # sbatch passes its environment to the job: one intra-op thread per stand-in node (each is CPUs=1), as real
    # nodes have their own cores; two kernels that each spin a thread on every core of this host wait on each other
    job = cluster.run("sbatch", "--wait", str(sbatch), timeout=420, check=False, env={"OMP_NUM_THREADS": "1"})
    summary = next(certs.glob("slurm-*.out")).read_text()
    assert job.returncode == 0, (job.stderr, summary, [p.read_text()[-1500:] for p in certs.glob("*.log")])
    assert "n1: passed" in summary and "n2: passed" in summary
    ranks = set()
    for node in ("n1", "n2"):
        cert = certs / f"{node}.cert.json"
        checked = run_cli("cert", "verify", str(cert), "--key", str(tmp_path / "key.pub"))
        assert checked.returncode == 0, checked.stderr
        distributed = json.loads(cert.read_text())["certificate"]["distributed"]
        assert distributed["nodes"] == 2 and distributed["world_size"] == 2
        ranks.add(distributed["node_rank"])
    assert ranks == {0, 1}  # both nodes met in one rendezvous, none was told the endpoint by hand


def test_the_health_check_drains_a_broken_node_with_its_reason(tmp_path: Path, cluster: SlurmCluster) -> None:
    envs = tmp_path / "envs"
    (envs / "n1" / "bin").mkdir(parents=True)
    healthy = envs / "n1" / "bin" / "python"  # this interpreter, as it runs: a link to a venv's python loses the venv
    healthy.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
    healthy.chmod(0o755)
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(envs / "n2")], check=True, timeout=120
    )  # no torch
    prom = tmp_path / "textfile"
    _, health, certs = scripts(tmp_path, str(envs) + "/$SLURMD_NODENAME/bin/python", "--prom-dir", str(prom))
    healthy = cluster.run("srun", "-w", "n1", "-N1", str(health), timeout=120, check=False)
    assert healthy.returncode == 0 and healthy.stdout.strip() == "lockgen: n1 certified", (
        healthy.stdout,
        healthy.stderr,
    )
    assert "lockgen_certificate_passed" in (prom / "lockgen.prom").read_text()  # node_exporter's textfile, whole
    try:
        broken = cluster.run("srun", "-w", "n2", "-N1", str(health), timeout=120, check=False)
        assert broken.returncode != 0 and broken.stdout.startswith("lockgen: "), (broken.stdout, broken.stderr)
        state, reason = cluster.states()["n2"]
        assert state.startswith("drain") and reason.startswith("lockgen: ") and "torch" in reason, (state, reason)
        assert (certs / "n2.health.log").is_file()
    finally:
        cluster.run("scontrol", "update", "NodeName=n2", "State=RESUME", check=False)
    assert cluster.states()["n1"][0] == "idle"


def test_a_health_check_whose_verify_ignores_sigterm_still_drains_before_slurm_kills_it(tmp_path: Path) -> None:
    """lockgen unwinds on SIGTERM (its kernel stopped, its folders removed); a verify that outlives the SIGTERM at the
    limit (a kernel deaf to it) is killed KILL_AFTER_S later, so the node is drained well within Slurm's 60 s."""
    stand_in = tmp_path / "lockgen"  # a verify that ignores SIGTERM and never ends
    stand_in.write_text("#!/bin/sh\ntrap '' TERM\nwhile :; do sleep 0.1; done\n")
    stand_in.chmod(0o755)
    scontrol = tmp_path / "bin" / "scontrol"  # records the drain instead of asking a controller
    scontrol.parent.mkdir()
    scontrol.write_text(f'#!/bin/sh\necho "$@" > {shlex.quote(str(tmp_path / "drained"))}\n')
    scontrol.chmod(0o755)
    done = run_cli(
        "fleet", "slurm", "--arch", "cpu", "--python", sys.executable, "--nodes", "1", "--certs",
        str(tmp_path / "certs"), "--out", str(tmp_path / "slurm"), "--lockgen", str(stand_in), "--health-limit", "5",
        "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    health = json.loads(done.stdout)["health"]
    env = {**os.environ, "SLURMD_NODENAME": "n1", "PATH": f"{scontrol.parent}:{os.environ['PATH']}"}
    checked = subprocess.run(["bash", health], capture_output=True, text=True, env=env, timeout=30)
    assert checked.returncode == 1 and "verify did not finish within 5 s" in checked.stdout, checked
    assert "State=DRAIN" in (tmp_path / "drained").read_text()
    too_long = run_cli(
        "fleet", "slurm", "--arch", "cpu", "--python", sys.executable, "--nodes", "1", "--certs",
        str(tmp_path / "certs"), "--out", str(tmp_path / "x"), "--health-limit", "58",
    )  # fmt: skip
    assert too_long.returncode == 1 and "pass 5 to 57" in too_long.stderr, too_long.stderr
