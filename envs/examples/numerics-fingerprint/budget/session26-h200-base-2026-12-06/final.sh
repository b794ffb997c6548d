#!/usr/bin/env bash
# Issue 48, item 4, the final tree only (device time was short; layout as run-budget.sh says, D/new the final tree): healthy `lockgen verify --quick` x3 and one
# full run, timed from outside (date +%s.%N around the command), after one warm-up `import torch`.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LOCKGEN_HOME=/tmp/lgh PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONPATH=/tmp/site:$PWD/new
PY=/opt/torch/.venv/bin/python3
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
$PY -c "import torch"
for name in quick1 quick2 quick3 full1 full2 quick4; do
  flag=$([ ${name#quick} != $name ] && echo --quick)
  s=$(date +%s.%N)
  $PY -m lockgen verify --arch sm90 --python $PY --key .keys/budget $flag --out $OUT/$name.cert.json > /tmp/$name.log 2>&1
  rc=$? e=$(date +%s.%N)
  printf "%-7s rc=%s %6.2f s from outside | %s\n" $name $rc $(python3 -c "print($e-$s)") "$(grep -E 'checks passed|^error' /tmp/$name.log | head -1 | cut -c1-300)"
  $PY -c "import json,sys; c=json.load(open(sys.argv[1]))['certificate']; f=c['figures']; print('   phases', ' '.join(f'{k}={v[\"value\"]:.2f}' for k,v in sorted(f['phases'].items()))); print('   gemm', {k:round(v['value']) for k,v in f['gemm'].items()}, 'conv', {k:round(v['value']) for k,v in f['conv'].items()}, 'fp32', f['training']['fp32_step_ms']['value'], 'bf16', f['training']['bf16_step_ms']['value'], 'replay', f['graphs']['bf16_replay_step_ms']['value']); print('   digests', ' '.join(f'{k}={v[:12]}' for k,v in sorted(c['numerics']['digests'].items())))" $OUT/$name.cert.json 2>/dev/null
done
