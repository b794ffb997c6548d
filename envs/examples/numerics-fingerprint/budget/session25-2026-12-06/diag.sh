#!/usr/bin/env bash
# Issue 48 item 4, session 25 call 1: where quick's 13.2 s go from outside (main's tree in D/new).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LOCKGEN_HOME=/tmp/lgh PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONPATH=/tmp/site:$PWD/new
PY=/opt/torch/.venv/bin/python3
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; uptime
$PY -c "import torch"
for i in 1 2; do /usr/bin/time -f "import torch %e s wall %U user %S sys" $PY -c "import torch"; done
for i in 1 2; do TORCH_DEVICE_BACKEND_AUTOLOAD=0 /usr/bin/time -f "import torch autoload=0 %e s wall %U user %S sys" $PY -c "import torch"; done
/usr/bin/time -f "import torch -S? no; python -I %e s" $PY -I -c "import torch"
$PY -X importtime -c "import torch" 2> /tmp/imp.txt; sort -t'|' -k2 -n -r /tmp/imp.txt | head -40 > $OUT/torch-importtime.txt
/usr/bin/time -f "lockgen import api.verify %e s" $PY -c "import lockgen.api.verify"
/usr/bin/time -f "lockgen import api.verify (2) %e s" $PY -c "import lockgen.api.verify"
$PY -X importtime -c "import lockgen.api.verify" 2> /tmp/imp2.txt; sort -t'|' -k2 -n -r /tmp/imp2.txt | head -30 > $OUT/lockgen-importtime.txt
for i in 1 2; do
  s=$(date +%s.%N)
  $PY exp/lgtime.py verify --arch sm90 --python $PY --key .keys/budget --quick --out /tmp/q$i.json 2>&1 | grep -E "lgtime|checks passed|^error" 
  echo "quick$i $(python3 -c "print(round($(date +%s.%N)-$s,2))") s from outside"
  $PY -c "import json,sys; c=json.load(open(sys.argv[1]))['certificate']; f=c['figures']; print('   phases', ' '.join(f'{k}={v[\"value\"]:.2f}' for k,v in sorted(f['phases'].items())))" /tmp/q$i.json
done
$PY -m cProfile -o /tmp/prof.out -m lockgen verify --arch sm90 --python $PY --key .keys/budget --quick --out /tmp/qp.json > /dev/null 2>&1
$PY -c "import pstats; p=pstats.Stats('/tmp/prof.out'); p.sort_stats('cumulative').print_stats(45)" > $OUT/lockgen-profile.txt 2>&1
$PY -c "import pstats; p=pstats.Stats('/tmp/prof.out'); p.sort_stats('tottime').print_stats(25)" >> $OUT/lockgen-profile.txt 2>&1
