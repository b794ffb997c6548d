#!/usr/bin/env bash
# Issue 48, item 4, the measuring call: where verify's time goes on the lent GPU (torch's import alone and in two
# processes at once, lockgen verify quick and full from outside with the kernel's phases and the moment lockgen
# spawns the kernel, lgtime.py), and the experiments for the cuts (cuts.py: the fingerprint in-process against
# the child's digests, model init, the fp32 loss trajectory, rests; ab.py: figures with and without
# CUBLAS_WORKSPACE_CONFIG=:4096:8; crash.py: a graph capture with PYTORCH_NO_CUDA_MEMORY_CACHING=1).
# Layout as run-budget.sh says (main's tree in D/base). Run: `bash D/exp/measure-phases.sh`.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/base LOCKGEN_HOME=/tmp/lgh PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=/opt/torch/.venv/bin/python3
T() { if [ -x /usr/bin/time ]; then /usr/bin/time -f "   [time] %e s wall, %U user, %S sys, %M KB max RSS" "$@"; else time "$@"; fi; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc; uptime
echo "== import torch"
$PY -X importtime -c "import torch" 2> $OUT/importtime.log; grep -E "\| torch$" $OUT/importtime.log
for i in 1 2; do T $PY -c "import torch"; done
echo "== two processes"
$PY exp/twoproc.py
phases() { $PY -c "import json,sys; c=json.load(open(sys.argv[1]))['certificate']; f=c['figures']['phases']; print('   phases:', ' '.join(f'{k}={v[\"value\"]:.2f}' for k,v in sorted(f.items()))); print('   passed', c['passed'], sum(x['passed'] for x in c['checks']), 'of', len(c['checks']), ' digests', ' '.join(f'{k}={v[:8]}' for k,v in sorted((c.get('numerics') or {}).get('digests',{}).items())))" "$1"; }
for mode in quick full; do
  echo "== lockgen verify $mode (base)"
  flag=$([ $mode = quick ] && echo --quick)
  s=$(date +%s.%N); T $PY exp/lgtime.py verify --arch sm90 --python $PY $flag --out $OUT/base-$mode.cert.json 2> $OUT/base-$mode.err; e=$(date +%s.%N)
  grep -E "lgtime|\[time\]|checks passed|^error" $OUT/base-$mode.err | grep -v "spawn nvidia" ; echo "   from outside: $(python3 -c "print(f'{$e-$s:.2f}')") s"
  phases $OUT/base-$mode.cert.json
done
echo "== gpu_host.probe and lockgen import"
T $PY -c "import time; t=time.monotonic(); from lockgen.adapters import gpu_host; gpu_host.probe(); print(f'   probe {time.monotonic()-t:.2f} s')"
T $PY -c "import time; t=time.monotonic(); import lockgen.api.verify; print(f'   import lockgen.api.verify {time.monotonic()-t:.2f} s')"
echo "== cuts (one process)"
$PY exp/cuts.py 2>&1 | tail -30
echo "== workspace A/B"
for c in unset ":4096:8" unset ":4096:8"; do if [ "$c" = unset ]; then env -u CUBLAS_WORKSPACE_CONFIG $PY exp/ab.py 2>&1 | tail -1; else CUBLAS_WORKSPACE_CONFIG=$c $PY exp/ab.py 2>&1 | tail -1; fi; done
echo "== PYTORCH_NO_CUDA_MEMORY_CACHING=1 graph capture"
PYTORCH_NO_CUDA_MEMORY_CACHING=1 $PY exp/crash.py > $OUT/crash.log 2>&1; echo "rc $?"; head -c 1500 $OUT/crash.log
