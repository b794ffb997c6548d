#!/usr/bin/env bash
# Issue 48 item 4, session 32, lease 2's second call (right after session32c.sh on the same H100): a node's first
# quick with the page cache as the last run left it (JIT cache a fresh folder, byte code kept) x2, warm quick x2,
# full x2. Layout: see certify.sh; run `set -o pipefail; bash D/exp/session32d.sh 2>&1 | tee $OUT/run.log`.
set -u
D=${D:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$D" || exit 1
source "$D/exp/certify.sh"
export PYTHONPYCACHEPREFIX=/tmp/pyc; unset PYTHONDONTWRITEBYTECODE
CUDA_CACHE_PATH=/tmp/jit-5 KEEP=1 certify new first3 --quick
CUDA_CACHE_PATH=/tmp/jit-6 certify new first4 --quick
export CUDA_CACHE_PATH=/tmp/jit-6
KEEP=1 certify new warm2 --quick
certify new warm3 --quick
KEEP=1 certify new full1
certify new full2
