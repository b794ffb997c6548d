#!/usr/bin/env bash
# Issue 48 item 4, session 32: main's tree (new/) on whichever card the lease gives (an H200 was asked for), each
# run timed from outside. The first runs as a lockgen environment meets a node: torch's byte code kept
# (PYTHONPYCACHEPREFIX, written by a first run; lockgen compiles it at materialize) and the CUDA JIT cache empty
# (CUDA_CACHE_PATH a fresh folder, twice); then warm quick x3, full x2, quick without byte code (the lender's
# environment as it is), TF32 off, and fleet status of the kept certificates. Layout: see certify.sh; run
# `set -o pipefail; bash D/exp/session32.sh 2>&1 | tee $OUT/run.log`.
set -u
D=${D:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$D" || exit 1
source "$D/exp/certify.sh"
$PY -c "import torch; torch.zeros(1).cuda(); print(torch.__version__, torch.cuda.get_device_name())"  # page cache, driver
export PYTHONPYCACHEPREFIX=/tmp/pyc; unset PYTHONDONTWRITEBYTECODE
CUDA_CACHE_PATH=/tmp/jit-0 certify new pycwrite --quick  # writes torch's byte code: not a figure
CUDA_CACHE_PATH=/tmp/jit-1 KEEP=1 certify new first1 --quick
CUDA_CACHE_PATH=/tmp/jit-2 certify new first2 --quick
export CUDA_CACHE_PATH=/tmp/jit-2
KEEP=1 certify new warm1 --quick
certify new warm2 --quick
certify new warm3 --quick
KEEP=1 certify new full1
KEEP=1 certify new full2
(unset PYTHONPYCACHEPREFIX; export PYTHONDONTWRITEBYTECODE=1; certify new nopyc --quick)
KEEP=1 NVIDIA_TF32_OVERRIDE=0 certify new tf32off --quick
echo "== fleet status of the kept certificates with their key"
PYTHONPATH=/tmp/site:$D/new $PY -m lockgen fleet status $OUT --key .keys/budget.pub > /tmp/fleet.log 2>&1; echo "exit $?"
cut -c1-300 /tmp/fleet.log
