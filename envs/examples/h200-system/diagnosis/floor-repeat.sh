#!/usr/bin/env bash
# Run on the device machine (nvidia-h200, no network), from the repository root, with lockgen's light wheels in
# .whl: sha256sum of every file with one process per core (the floor), then where a repeated check's time goes (its imports, the stat walk, the rest), then a first check and one
# that hashes every file again (the conformance record removed, the byte-code proofs kept), each timed, three
# times; the byte code of lockgen and its wheels is compiled first, as an installed lockgen has it.
set -uo pipefail
sys=envs/examples/h200-system
python3 -m pip install -q --no-index --no-deps --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
python3 -m compileall -q lockgen > /dev/null
export PYTHONPATH="/tmp/site:$PWD" LOCKGEN_HOME=/tmp/lockgen-home PYTHONUNBUFFERED=1
PY=/opt/torch/.venv/bin/python3
site=lib/python3.12/site-packages
allow=(--allow-foreign $site/_virtualenv.py --allow-foreign $site/_virtualenv.pth --allow-foreign $site/_sandboxing_egress_ca.pth)
args=(check --lock $sys/locks/h200.conda-lock.yml --python "$PY" --manifests $sys/locks/h200.manifests.json.gz "${allow[@]}")
timed() { /usr/bin/time -f "$1: %e s wall %U+%S s cpu" python3 -m lockgen "${args[@]}" > /dev/null 2> /tmp/err; tail -1 /tmp/err; }
echo "PYTHONDONTWRITEBYTECODE=${PYTHONDONTWRITEBYTECODE:-unset}"
find /opt/torch/.venv -type f -print0 > /tmp/venv-files.0
for run in cold warm warm; do  # the floor: sha256sum of every file, one process per core; the first warms the file cache
  /usr/bin/time -f "sha256sum -P$(nproc) ($run): %e s wall %U+%S s cpu" xargs -0 -P"$(nproc)" -n 256 sha256sum < /tmp/venv-files.0 > /dev/null
done
for run in 1 2 3; do rm -rf "$LOCKGEN_HOME"; timed "first check, fresh home $run"; done
for run in 1 2 3; do rm -rf "$LOCKGEN_HOME/conformance"; timed "every file hashed again, byte-code proofs kept $run"; done
/usr/bin/time -f "sha256sum -P$(nproc) (warm, after the checks): %e s wall %U+%S s cpu" xargs -0 -P"$(nproc)" -n 256 sha256sum < /tmp/venv-files.0 > /dev/null
timed "a check after those (keeps the verdict)"
for run in 1 2 3 4 5; do timed "repeated check $run"; done
echo "== start-up: python, import typer, the modules a repeated check imports"
for what in "pass" "import typer" "import lockgen.cli, lockgen.cli.env_cmds, lockgen.api.check"; do
  /usr/bin/time -f "python3 -c '$what': %e s wall %U+%S s cpu" python3 -c "$what"
done
echo "== the stat walk alone, five times (in one process)"
python3 -c "
import time
from pathlib import Path
from lockgen.adapters.stat_walk import tree_fingerprint
for _ in range(5):
    started = time.perf_counter(); fingerprint = tree_fingerprint(Path('/opt/torch/.venv'))
    print(f'walk of {fingerprint.paths} paths: {time.perf_counter() - started:.3f} s')
"
echo "== importtime of a repeated check: the 15 slowest"
python3 -X importtime -m lockgen "${args[@]}" 2>&1 >/dev/null | grep "import time" | sort -t'|' -k2 -n | tail -15
echo "== verify --quick, then bound to the lock twice (KEY signs; the difference is what the lock's proof costs)"
if [ -n "${KEY:-}" ]; then
  /usr/bin/time -f "verify --quick: %e s wall" python3 -m lockgen verify --arch sm90 --quick --python "$PY" --key "$KEY" --out /tmp/plain.cert.json 2>&1 | grep -E "FAIL|checks passed|^error|wall" | cut -c1-300
  for run in 1 2; do
    /usr/bin/time -f "verify --quick --lock ($run): %e s wall" python3 -m lockgen verify --arch sm90 --quick --lock $sys/locks/h200.conda-lock.yml \
      --manifests $sys/locks/h200.manifests.json.gz "${allow[@]}" --python "$PY" --key "$KEY" --out "${OUT:-/tmp}/${NAME:-floor-repeat}.cert.json" 2>&1 \
      | grep -E "FAIL|checks passed|^error|wall|conforms" | cut -c1-300
  done
fi
