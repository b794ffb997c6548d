#!/usr/bin/env bash
# Run on the device machine (nvidia-h200, no network), from the repository root, with lockgen's light wheels in
# .whl and the lockgen of the commit before the change in .device/before/lockgen (made here by
# `git archive <commit> lockgen | tar -x -C .device/before`; both carried): a check that hashes every file of
# the H200 venv again (the conformance record removed, the manifests and byte-code proofs kept), the code before
# and after the change alternating with sha256sum on every core (the floor), four rounds, then repeated checks.
# Both trees' byte code is compiled first, as an installed lockgen has it.
set -uo pipefail
sys=envs/examples/h200-system
python3 -m pip install -q --no-index --no-deps --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
python3 -m compileall -q lockgen .device/before/lockgen > /dev/null
export LOCKGEN_HOME=/tmp/lockgen-home PYTHONUNBUFFERED=1
PY=/opt/torch/.venv/bin/python3
site=lib/python3.12/site-packages
allow=(--allow-foreign $site/_virtualenv.py --allow-foreign $site/_virtualenv.pth --allow-foreign $site/_sandboxing_egress_ca.pth)
args=(check --lock $sys/locks/h200.conda-lock.yml --python "$PY" --manifests $sys/locks/h200.manifests.json.gz "${allow[@]}")
timed() {  # LABEL TREE: a check by the lockgen in TREE
  PYTHONPATH="/tmp/site:$2" /usr/bin/time -f "$1: %e s wall %U+%S s cpu" python3 -m lockgen "${args[@]}" > /dev/null 2> /tmp/err; tail -1 /tmp/err
}
floor() { /usr/bin/time -f "sha256sum -P$(nproc) ($1): %e s wall %U+%S s cpu" xargs -0 -P"$(nproc)" -n 256 sha256sum < /tmp/venv-files.0 > /dev/null; }
find /opt/torch/.venv -type f -print0 > /tmp/venv-files.0
echo "$(nproc) cores; $(tr '\0' '\n' < /tmp/venv-files.0 | wc -l) files"
floor cold
rm -rf "$LOCKGEN_HOME"; timed "first check, fresh home (keeps the manifests and byte-code proofs)" "$PWD"
for run in 1 2 3 4; do
  rm -rf "$LOCKGEN_HOME/conformance"; timed "every file hashed again, before ($run)" "$PWD/.device/before"
  rm -rf "$LOCKGEN_HOME/conformance"; timed "every file hashed again, after ($run)" "$PWD"
  floor "warm $run"
done
rm -rf "$LOCKGEN_HOME/conformance"; PYTHONPATH="/tmp/site:$PWD" python3 -m lockgen -v "${args[@]}" 2>&1 | tail -4 | cut -c1-300
for run in 1 2 3; do timed "repeated check, after ($run)" "$PWD"; done
echo "== where a check that hashes every file again spends its wall time (after; two runs)"
for run in 1 2; do
  rm -rf "$LOCKGEN_HOME/conformance"
  PYTHONPATH="/tmp/site:$PWD" python3 - "$sys/locks/h200.conda-lock.yml" "$PY" "$sys/locks/h200.manifests.json.gz" <<'PY'
import sys, time
from pathlib import Path
started, marks = time.perf_counter(), []
def timed(owner, name):
    real = getattr(owner, name)
    def wrapper(*args, **kwargs):
        at = time.perf_counter(); value = real(*args, **kwargs); marks.append((name, at - started, time.perf_counter() - at)); return value
    setattr(owner, name, wrapper)
from lockgen.adapters import bytecode_proof, parallel, prefix_observer, stat_walk
from lockgen.api import check
from lockgen.api.steps import manifest_steps
from lockgen.core import conformance
from lockgen.model.requests import Python
for owner, name in [(stat_walk, "tree_fingerprint"), (prefix_observer, "likely_wanted"), (manifest_steps, "expected_packages"), (prefix_observer, "observe"), (parallel.HashedAhead, "digests"), (prefix_observer, "hash_files"), (bytecode_proof, "unproven"), (conformance, "compare")]:
    timed(owner, name)
site = "lib/python3.12/site-packages"
result = check.check_lock(Path(sys.argv[1]), Python(sys.argv[2]), Path(sys.argv[3]), allow_foreign=[f"{site}/_virtualenv.py", f"{site}/_virtualenv.pth", f"{site}/_sandboxing_egress_ca.pth"])
print(f"check_lock: {time.perf_counter() - started:.2f} s in all, clean {result.clean}")
for name, at, took in marks:
    print(f"  {name:18s} from {at:5.2f} s, {took:5.2f} s")
PY
done
