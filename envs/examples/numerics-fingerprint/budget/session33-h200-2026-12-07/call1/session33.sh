#!/usr/bin/env bash
# Issue 48 item 4, session 33, a fresh lease for an H200 (asked for, not required): main's tree (new/) timed from
# outside. On an H200: torch's byte code written by a first run (not a figure), a node's first quick with nothing in
# memory (page cache dropped, CUDA JIT cache a fresh folder, byte code kept) x2, warm quick x2, full x2, TF32 off,
# and fleet status of the kept certificates; on any other card only the first quick and one warm (another lease's
# figures). Layout: see certify.sh; run `set -o pipefail; bash D/exp/session33.sh 2>&1 | tee $OUT/run.log`.
set -u
D=${D:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$D" || exit 1
source "$D/exp/certify.sh"
export PYTHONPYCACHEPREFIX=/tmp/pyc; unset PYTHONDONTWRITEBYTECODE
drop() { sync; if echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; then echo "page cache dropped"; else echo "page cache NOT dropped"; fi; }
CUDA_CACHE_PATH=/tmp/jit-0 certify new pycwrite --quick  # writes torch's byte code: not a figure
drop; CUDA_CACHE_PATH=/tmp/jit-1 KEEP=1 certify new first1 --quick
export CUDA_CACHE_PATH=/tmp/jit-1
if ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  certify new warm1 --quick; echo "not an H200: the rest not run"; exit 0
fi
drop; CUDA_CACHE_PATH=/tmp/jit-2 certify new first2 --quick
KEEP=1 certify new warm1 --quick
certify new warm2 --quick
KEEP=1 certify new full1
KEEP=1 certify new full2
KEEP=1 NVIDIA_TF32_OVERRIDE=0 certify new tf32off --quick
echo "== fleet status of the kept certificates with their key"
PYTHONPATH=/tmp/site:$D/new $PY -m lockgen fleet status $OUT --key .keys/budget.pub > /tmp/fleet.log 2>&1; echo "exit $?"
cut -c1-300 /tmp/fleet.log
