#!/usr/bin/env bash
# Issue 48 item 4, session 32, call 2 (the same lease as session32.sh, right after it): a node's first quick with
# nothing in memory: the page cache dropped (`echo 3 > /proc/sys/vm/drop_caches`, said whether it took) and the CUDA
# JIT cache a fresh folder, torch's byte code kept; twice, then once warm. Layout: see certify.sh; run
# `set -o pipefail; bash D/exp/session32b.sh 2>&1 | tee $OUT/run.log`.
set -u
D=${D:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$D" || exit 1
source "$D/exp/certify.sh"
export PYTHONPYCACHEPREFIX=/tmp/pyc; unset PYTHONDONTWRITEBYTECODE
ls /tmp/pyc > /dev/null 2>&1 && echo "torch's byte code kept from the first call: $(du -sh /tmp/pyc | cut -f1)"
drop() { sync; if echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; then echo "page cache dropped"; else echo "page cache NOT dropped (not permitted)"; fi; free -g | sed -n 2p; }
drop; CUDA_CACHE_PATH=/tmp/jit-3 KEEP=1 certify new cold1 --quick
drop; CUDA_CACHE_PATH=/tmp/jit-4 certify new cold2 --quick
CUDA_CACHE_PATH=/tmp/jit-4 certify new warm4 --quick
