#!/usr/bin/env bash
# Issue 48, item 4: healthy `lockgen verify --quick` x3 and full x2, timed from outside (date +%s.%N around
# the command), with this branch's lockgen/verify (new/) and main's (base/) on the same machine, then a quick
# run with PYTORCH_NO_CUDA_MEMORY_CACHING=1 (the kernel dies; lockgen must name the phase and the setting).
# Layout (the device tool carries one folder, D): D/exp/ (this file and the .py beside it), D/base/ and D/new/
# (each a tree's lockgen/ and verify/), D/.whl (lockgen's light wheels, listed in ../run-numerics.sh), D/.keys/budget
# (`lockgen keygen --out D/.keys/budget`). Run: `bash D/exp/run-budget.sh 2>&1 | tee $OUT/run-budget.log`.
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p $OUT /tmp/base-certs
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LOCKGEN_HOME=/tmp/lgh PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=/opt/torch/.venv/bin/python3
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; uptime
$PY -c "import torch" # the page cache warm for both trees alike
certify() {  # TREE NAME [flags...]: lockgen verify timed from outside (date +%s.%N around it)
  local tree=$1 name=$2; shift 2
  local s=$(date +%s.%N)
  local cert=$OUT/$tree-$name.cert.json; [ $tree = base ] && cert=/tmp/base-certs/$name.cert.json
  PYTHONPATH=/tmp/site:$PWD/$tree $PY -m lockgen verify --arch sm90 --python $PY --key .keys/budget "$@" --out $cert > /tmp/$tree-$name.log 2>&1
  local rc=$? e=$(date +%s.%N)
  printf "%-5s %-14s rc=%s %6.2f s from outside | " $tree $name $rc $(python3 -c "print($e-$s)")
  grep -E "checks passed|^error" /tmp/$tree-$name.log | head -2 | tr '\n' ' '
  [ -f $cert ] && $PY -c "import json,sys; c=json.load(open(sys.argv[1]))['certificate']; f=c['figures']; p=f['phases']; print(); print('      phases', ' '.join(f'{k}={v[\"value\"]:.2f}' for k,v in sorted(p.items()))); print('      gemm', {k:round(v['value']) for k,v in f['gemm'].items()}, 'conv', {k:round(v['value']) for k,v in f['conv'].items()}, 'fp32', f['training']['fp32_step_ms']['value'], 'bf16', f['training']['bf16_step_ms']['value'], 'replay', f['graphs']['bf16_replay_step_ms']['value']); print('      digests', ' '.join(f'{k}={v[:12]}' for k,v in sorted(c['numerics']['digests'].items())))" $cert || echo
}
certify new quick1 --quick
certify base quick1 --quick
certify new quick2 --quick
certify new quick3 --quick
certify new full1
certify new full2
echo "== PYTORCH_NO_CUDA_MEMORY_CACHING=1 (new)"
s=$(date +%s.%N); PYTORCH_NO_CUDA_MEMORY_CACHING=1 PYTHONPATH=/tmp/site:$PWD/new $PY -m lockgen verify --arch sm90 --python $PY --quick --out /tmp/new-nocache.cert.json > /tmp/new-nocache.log 2>&1; echo "rc $? $(python3 -c "print(round($(date +%s.%N)-$s,2))") s"
grep -vE "^  ok  " /tmp/new-nocache.log | tail -8 | cut -c1-900
