"""Slurm scripts for certifying nodes, as text: an sbatch job that certifies N nodes at once (one launcher
per node through `srun`, torchrun's rendezvous taken from `SLURM_*`, one certificate per node collected in
one folder, a summary naming each node's result), and a `HealthCheckProgram` that certifies its node with
`--quick` inside Slurm's 60 s limit and drains it with lockgen's one-line reason when it fails.

Every value lockgen puts into a script is shell-quoted; `$VARIABLES` in `--python`/`--prefix` are left to
the node's shell on purpose (each node may keep its environment at its own path), and no other `$` form
(`$(…)`, `${x:-…}`) is accepted. `#SBATCH` lines are read by sbatch, not a shell: it strips no single
quotes and a newline would end the line, so their values must be of a safe set and are written bare.
`check_job` refuses, before anything is written, every value that breaks these rules."""

from __future__ import annotations

import re
import shlex

from lockgen.core.image.image_reference import refuse_credentials
from lockgen.errors import UserError
from lockgen.model.fleet import CertifyJob, SlurmHealth
from lockgen.model.requests import Image, Prefix, Python

KILL_AFTER_S = 2  # the health check's SIGKILL, after its SIGTERM at the limit: a kernel may ignore the SIGTERM
RENDEZVOUS_BASE_PORT = 29400  # torchrun's default c10d port; the job id spreads concurrent jobs over 1000 ports
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_VARIABLE = re.compile(r"\$(?:[A-Za-z_][A-Za-z0-9_]*|\{[A-Za-z_][A-Za-z0-9_]*\})")
_SBATCH_SAFE = {  # what each #SBATCH value may hold (Slurm's own syntax for it), written as is
    "--arch": (re.compile(r"[A-Za-z0-9_.-]+"), "letters, digits, `_`, `.` and `-`"),
    "--partition": (re.compile(r"[A-Za-z0-9_.,-]+"), "letters, digits, `_`, `.`, `-` and `,` between partitions"),
    "--time": (re.compile(r"[A-Za-z0-9:-]+"), "Slurm's time form, e.g. 00:15:00 or 1-00:00:00"),
    "--constraint": (re.compile(r"[A-Za-z0-9_.,:&|*!\[\]()-]+"), "feature names joined by & | , with [ ] ( ) * !"),
    "--certs": (re.compile(r"[A-Za-z0-9_./+@=,:-]+"), "a path of letters, digits and `_ . / + @ = , : -`"),
}


def check_job(job: CertifyJob, *extra: str) -> None:
    """Refuses (one UserError naming the flag) a value with a control character, a `$` that is not a plain
    `$NAME`/`${NAME}`, or, for an #SBATCH line, a character outside its safe set; `extra` are more words
    of the scripts (the health check's output folders)."""
    bare = {
        "--arch": job.arch,
        "--partition": job.partition,
        "--time": job.time_limit,
        "--constraint": job.constraint,
        "--certs": job.out_dir,
    }
    flag, *named = _environment_words(job)
    if flag == "--image":  # written into every node's scripts: no credential ever is
        refuse_credentials(named[0], "--image")
    words = {
        "--lockgen": (job.lockgen,),
        flag: tuple(named),
        "--lock": (job.lock,),
        "--manifests": (job.manifests,),
        "--allow-foreign": job.allow_foreign,
        "--key": (job.key,),
        "the health check's folders": extra,
    }
    for flag, values in {**{k: (v,) for k, v in bare.items()}, **words}.items():
        for value in (v for v in values if v is not None):
            if _CONTROL.search(value):
                raise UserError(
                    f"{flag} {value[:80]!r} holds a control character (a newline ends a script line)",
                    f"pass {flag} without newlines, tabs or other control characters",
                )
            if "$" in _VARIABLE.sub("", value):
                raise UserError(
                    f"{flag} {value[:80]!r} holds a `$` that is not a variable ($NAME or ${{NAME}})",
                    "the node's shell expands plain variables only; write the value out",
                )
    for flag, setting in bare.items():
        pattern, allowed = _SBATCH_SAFE[flag]
        if setting is not None and not pattern.fullmatch(setting):
            raise UserError(
                f"{flag} {setting[:80]!r} cannot go on an #SBATCH line, which sbatch reads without a shell",
                f"use {allowed}",
            )


def _word(value: str) -> str:
    """One argument for the node's shell: single-quoted, or double-quoted when it holds `$VARIABLES`, which
    the node's shell then expands."""
    if "$" not in value:
        return shlex.quote(value)
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("`", "\\`") + '"'


def _words(values: tuple[str, ...]) -> str:
    return " ".join(_word(value) for value in values)


def _environment_words(job: CertifyJob) -> tuple[str, ...]:
    """The flag naming the environment each node certifies, and its value, as the job's lockgen takes them."""
    target = job.environment
    if isinstance(target, Prefix):
        return "--prefix", str(target.path)
    if isinstance(target, Image):  # `fleet slurm` takes no --insecure or --image-prefix: the image's own settings
        return "--image", target.source
    return ("--python", target.interpreter) if isinstance(target, Python) else ("--python",)


def _verify_words(job: CertifyJob) -> tuple[str, ...]:
    words = ["verify", "--arch", job.arch, *_environment_words(job), "--timeout", str(job.timeout_s)]
    if job.lock:
        words += ["--lock", job.lock]
        words += ["--manifests", job.manifests] if job.manifests else []
        words += [w for path in job.allow_foreign for w in ("--allow-foreign", path)]
    if job.key:
        words += ["--key", job.key]
    if job.quick:
        words.append("--quick")
    if job.gpus_per_node is not None:
        words += ["--gpus", str(job.gpus_per_node)]
    return tuple(words)


def sbatch_script(job: CertifyJob) -> str:
    """The batch script: `sbatch certify.sbatch` certifies `job.nodes` nodes together."""
    options = [
        f"#SBATCH --job-name=lockgen-certify-{job.arch}",
        f"#SBATCH --nodes={job.nodes}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --time={job.time_limit}",
        f"#SBATCH --output={job.out_dir}/slurm-%j.out",
    ]  # bare: check_job allowed only a safe set
    if job.partition:
        options.append(f"#SBATCH --partition={job.partition}")
    if job.constraint:
        options.append(f"#SBATCH --constraint={job.constraint}")
    verify = f"{job.lockgen} {_words(_verify_words(job))}"
    return "\n".join(
        [
            "#!/bin/bash",
            "# Written by `lockgen fleet slurm`: certifies every node of the allocation at once. Each node runs one",
            "# lockgen verify; torchrun's rendezvous comes from SLURM_* (the first node's address, a port from the",
            "# job id); each node's certificate and log land in OUT (a folder every node can write).",
            *options,
            "set -uo pipefail",
            f"out={shlex.quote(job.out_dir)}",
            'mkdir -p "$out"',
            'head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
            'head_addr=$(scontrol show node "$head_node" | sed -n "s/.*NodeAddr=\\([^ ]*\\).*/\\1/p")',
            f"port=$(( {RENDEZVOUS_BASE_PORT} + SLURM_JOB_ID % 1000 ))",
            "# one launcher per node; a node that fails does not stop the others (its log says why)",
            "srun --ntasks-per-node=1 --kill-on-bad-exit=0 bash -c '"
            + verify.replace("'", "'\\''")
            + ' --nodes "$SLURM_JOB_NUM_NODES" --rendezvous "$0:$1" --rendezvous-id "lockgen-$SLURM_JOB_ID"'
            ' --out "$2/$SLURMD_NODENAME.cert.json" > "$2/$SLURMD_NODENAME.log" 2>&1\' "$head_addr" "$port" "$out"',
            "status=0",
            'for node in $(scontrol show hostnames "$SLURM_JOB_NODELIST"); do',
            '  if [ -s "$out/$node.cert.json" ] && ! grep -q "^error:" "$out/$node.log"; then',
            '    echo "$node: passed ($out/$node.cert.json)"',
            "  else",
            '    reason=$(grep "^error:" "$out/$node.log" | head -n 1)',
            '    echo "$node: FAILED: ${reason:-no certificate and no error line (see $out/$node.log)}"',
            "    status=1",
            "  fi",
            "done",
            'exit "$status"',
            "",
        ]
    )


def health_script(job: CertifyJob, health: SlurmHealth) -> str:
    """Slurm's `HealthCheckProgram`: certifies this node with `--quick` within `limit_s` (Slurm kills the
    program after 60 s), prints the reason and, with `drain`, drains the node with it when it fails. With
    `prom_dir` (node_exporter's textfile folder) and `nfd_dir` (NFD's features.d) the certificate is also
    written there, atomically, for the metrics and node labels."""
    limit_s, drain, prom_dir, nfd_dir = health.limit_s, health.drain, health.prom_dir, health.nfd_dir
    emits = ([f"prom={prom_dir}/lockgen.prom"] if prom_dir else []) + ([f"nfd={nfd_dir}/lockgen"] if nfd_dir else [])
    verify = f"{job.lockgen} {_words(_verify_words(job) + tuple(w for e in emits for w in ('--emit', e)))}"
    lines = [
        "#!/bin/bash",
        "# Written by `lockgen fleet slurm`: slurm.conf `HealthCheckProgram=` this file. It certifies this node",
        f"# with lockgen verify --quick within {limit_s} s; on a failure it prints lockgen's reason"
        + (" and drains the node with it." if drain else "."),
        "set -uo pipefail",
        'node="${SLURMD_NODENAME:-$(hostname -s)}"',
        f"out={shlex.quote(job.out_dir)}",
        'mkdir -p "$out"',
        # SIGTERM at the limit (lockgen then stops its kernel and cleans up), SIGKILL KILL_AFTER_S later: within
        # Slurm's own kill, so the node is drained whatever its kernel ignores
        f"timeout -k {KILL_AFTER_S} {limit_s} {verify} "
        '--out "$out/$node.health.cert.json" > "$out/$node.health.log" 2>&1',
        "status=$?",
        '[ "$status" -eq 0 ] && { echo "lockgen: $node certified"; exit 0; }',
        f'case "$status" in 124 | 137) reason="verify did not finish within {limit_s} s" ;; *) reason=$(grep "^error:" '
        '"$out/$node.health.log" | head -n 1 | cut -c 8-) ;; esac',
        'reason="lockgen: ${reason:-verify exited $status (see $out/$node.health.log)}"',
        'echo "$reason"',
    ]
    if drain:
        lines.append('scontrol update NodeName="$node" State=DRAIN Reason="${reason:0:240}"')
    lines += ["exit 1", ""]
    return "\n".join(lines)
