#!/usr/bin/env bash
# Run on the device machine (nvidia-h200, no network), from the repository root, with lockgen's light wheels in
# .whl and a signing key (KEY): lock-checks.sh first (the floor, three checks, verify --quick with and without
# the lock), then five more repeated checks of the kept verdict (one stat walk, shared among the cores since
# b33d7c0), then one check that hashes every file again (the conformance record removed, the byte-code
# proofs kept) under cProfile, its parent's hot spots printed: what a first check does that sha256sum does not.
set -uo pipefail
sys=envs/examples/h200-system
OUT="${OUT:-$sys/diagnosis}" bash $sys/diagnosis/lock-checks.sh || exit 1
export PYTHONPATH="/tmp/site:$PWD" LOCKGEN_HOME=/tmp/lockgen-home PYTHONUNBUFFERED=1
PY=/opt/torch/.venv/bin/python3
site=lib/python3.12/site-packages
args=(check --lock $sys/locks/h200.conda-lock.yml --python "$PY" --manifests $sys/locks/h200.manifests.json.gz
      --allow-foreign $site/_virtualenv.py --allow-foreign $site/_virtualenv.pth --allow-foreign $site/_sandboxing_egress_ca.pth)
echo "== repeated check --lock, five more"
for run in 1 2 3 4 5; do
  /usr/bin/time -f "repeated check $run: %e s wall %U+%S s cpu" python3 -m lockgen "${args[@]}" > /dev/null 2> /tmp/err || tail -2 /tmp/err
  tail -1 /tmp/err
done
echo "== a check that hashes every file again (byte-code proofs kept), under cProfile"
rm -rf "$LOCKGEN_HOME/conformance"
python3 - "${args[@]}" <<'PY' 2>&1 | tail -60
import cProfile, os, pstats, runpy, sys, time
sys.argv = ["lockgen", *sys.argv[1:]]
profile = cProfile.Profile()
started = time.perf_counter()
def report(code=0):
    profile.disable()
    print(f"wall {time.perf_counter() - started:.2f} s, exit {code}")
    stats = pstats.Stats(profile)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumtime").print_stats(30)
    sys.stdout.flush()
    end(code if isinstance(code, int) else 1)
end = os._exit
os._exit = report
profile.enable()
try:
    runpy.run_module("lockgen", run_name="__main__")
except SystemExit as stop:
    report(stop.code)
report(0)
PY
