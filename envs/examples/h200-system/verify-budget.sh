#!/usr/bin/env bash
# Run on the device machine (nvidia-h200, no network), from the repository root, with lockgen's light
# wheels in .whl and the signing key in .keys/h200.key (public half: h200-signing.pub):
#   1. where the kernel's time goes, per phase (benchmarks/bench_verify_phases.py, 3 runs of each mode);
#   2. lockgen verify --quick and the full run, timed from outside, and the full run bound to the lock;
#   3. the failure cases of the new checks: cuDNN off (torch's own im2col convolutions), cuDNN untuned
#      (autotuner off, deterministic algorithms: shown NOT to be slower on this stack), a CUDA graph
#      capture that syncs, a replay whose weights were overwritten behind the graph.
set -uo pipefail
here=envs/examples/h200-system
out="${OUT:-$here}"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="/tmp/site:$PWD" LOCKGEN_HOME=/tmp/lockgen-home PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=/opt/torch/.venv/bin/python3
L=$here/locks/h200.conda-lock.yml
M=$here/locks/h200.manifests.json.gz
key=.keys/h200.key
site=lib/python3.12/site-packages
allow=(--allow-foreign $site/_virtualenv.py --allow-foreign $site/_virtualenv.pth --allow-foreign $site/_sandboxing_egress_ca.pth)
lg() { python3 -m lockgen "$@"; }
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
echo "== 1. phases"
$PY benchmarks/bench_verify_phases.py --arch sm90 --python "$PY" --repeats 3 --modes quick,full --out /tmp/phase-docs
echo "== 2. lockgen verify, timed from outside"
( time lg verify --arch sm90 --quick --python "$PY" --key "$key" --out "$out/h200-quick.cert.json" ) 2>&1 | tail -6
( time lg verify --arch sm90 --python "$PY" --key "$key" --out "$out/h200-full.cert.json" ) 2>&1 | tail -6
( time lg verify --arch sm90 --lock "$L" --manifests "$M" "${allow[@]}" --python "$PY" --key "$key" --out "$out/h200-lock-full.cert.json" ) 2>&1 | tail -6
echo "== 3. failure cases"
for fault in VERIFY_FAULT_CUDNN=off VERIFY_FAULT_CUDNN=untuned VERIFY_FAULT_GRAPH=sync VERIFY_FAULT_GRAPH=corrupt; do
  name=$(echo "${fault#VERIFY_FAULT_}" | tr 'A-Z=' 'a-z-')
  echo "-- $fault"
  env "$fault" python3 -m lockgen verify --arch sm90 --quick --python "$PY" --key "$key" --out "$out/degraded-$name.cert.json" 2>&1 | grep -E "FAIL|checks passed|^error" | cut -c1-400
done
lg cert verify "$out/h200-lock-full.cert.json" --key "$here/h200-signing.pub" --lock "$L" && echo "bound to the lock, signature good"
