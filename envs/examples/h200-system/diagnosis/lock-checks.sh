#!/usr/bin/env bash
# Run on the device machine (nvidia-h200, no network), from the repository root, with lockgen's light wheels in
# .whl and a signing key (KEY, default the one of run-diagnosis.sh in .keys/diagnosis): the machine's venv
# (/opt/torch/.venv, 68,934 files) proven against the committed h200 lock three times (the first check hashes
# every file and proves each __pycache__ file against its source with a Python of its tag; a later one finds the
# whole verdict kept under $LOCKGEN_HOME/conformance, bound to one stat walk of the tree, or else trusts the
# per-file fingerprints), against sha256sum of every file with one process per core, then verify --quick without the lock and bound to it, twice (certificate NAME).
set -uo pipefail
sys=envs/examples/h200-system
out="${OUT:-$sys/diagnosis}"
key="${KEY:-.keys/diagnosis}"
name="${NAME:-healthy-lock-quick}"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="/tmp/site:$PWD" LOCKGEN_HOME=/tmp/lockgen-home PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=/opt/torch/.venv/bin/python3
L=$sys/locks/h200.conda-lock.yml
M=$sys/locks/h200.manifests.json.gz
site=lib/python3.12/site-packages
allow=(--allow-foreign $site/_virtualenv.py --allow-foreign $site/_virtualenv.pth --allow-foreign $site/_sandboxing_egress_ca.pth)
lg() { python3 -m lockgen "$@"; }
python3 --version; $PY --version
echo "pyc files in the venv: $(find /opt/torch/.venv -name '*.pyc' | wc -l)"
echo "== the floor: sha256sum of every file of the venv, one process per core ($(nproc)); twice, the first warms the file cache"
find /opt/torch/.venv -type f -print0 > /tmp/venv-files.0
echo "files: $(tr -cd '\0' < /tmp/venv-files.0 | wc -c)"
for run in cold warm; do
  ( time xargs -0 -P"$(nproc)" -n 256 sha256sum < /tmp/venv-files.0 > /dev/null ) 2>&1 | grep -E "^(real|user|sys)" | tr '\n' ' '; echo "($run)"
done
for run in first second third; do
  echo "== check --lock ($run)"
  ( time lg check --lock "$L" --python "$PY" --manifests "$M" "${allow[@]}" --json > /tmp/check-$run.json ) 2>&1 | tail -4
  python3 -c "import json; d = json.load(open('/tmp/check-$run.json')); print('clean:', d.get('clean'), {k: v for k, v in d.get('counts', {}).items() if v}, d.get('report', {}).get('bytecode', [])[:3] if isinstance(d.get('report'), dict) else '')" 2>&1 | cut -c1-400
done
cp /tmp/check-third.json "$out/lock-check.json"
echo "== verify --quick, then bound to the lock twice (the difference is what the lock's proof costs a health check)"
( time lg verify --arch sm90 --quick --python "$PY" --key "$key" --out /tmp/plain.cert.json ) 2>&1 \
    | grep -E "FAIL|checks passed|^error|^real" | cut -c1-300
for run in first second; do
  ( time lg verify --arch sm90 --quick --lock "$L" --manifests "$M" "${allow[@]}" --python "$PY" --key "$key" \
      --out "$out/$name.cert.json" ) 2>&1 | grep -E "FAIL|checks passed|^error|^real|conforms" | cut -c1-300
done
