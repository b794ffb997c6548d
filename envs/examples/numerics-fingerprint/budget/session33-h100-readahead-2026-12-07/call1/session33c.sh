#!/usr/bin/env bash
# Issue 48 item 4, session 33: torch's libraries read ahead while torch is imported (verify/read_ahead.py, tree
# pre/) against main without it (new/, 1680ef5), a node's first quick with the page cache dropped before each run:
# JIT cache kept (the disk's share alone) x3 alternated, then a fresh JIT cache once each, then warm once each.
# Layout: see certify.sh; run `set -o pipefail; bash D/exp/session33c.sh 2>&1 | tee $OUT/run.log`.
set -u
D=${D:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$D" || exit 1
source "$D/exp/certify.sh"
export PYTHONPYCACHEPREFIX=/tmp/pyc; unset PYTHONDONTWRITEBYTECODE
drop() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || echo "page cache NOT dropped"; }
export CUDA_CACHE_PATH=/tmp/jit-1
[ -d /tmp/pyc ] || certify new pycwrite --quick  # a fresh lease: torch's byte code and the JIT cache first
for i in 1 2 3; do drop; certify new disk$i --quick; drop; certify pre disk$i --quick; done
drop; CUDA_CACHE_PATH=/tmp/jit-n1 KEEP=1 certify new first1 --quick
drop; CUDA_CACHE_PATH=/tmp/jit-p1 KEEP=1 certify pre first1 --quick
KEEP=1 certify new warm1 --quick
KEEP=1 certify pre warm1 --quick
