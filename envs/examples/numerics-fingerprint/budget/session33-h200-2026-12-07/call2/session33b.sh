#!/usr/bin/env bash
# Issue 48 item 4, session 33, the second call on the H200 of session33.sh (or a fresh lease): where a node's first
# quick spends its time (page cache dropped with the CUDA JIT cache kept, against a fresh JIT cache with the page
# cache warm), and three more full runs (the first full of session33.sh failed amp_speedup_floor host-bound: is the
# bf16 step's host time that variable on this host?). Layout: see certify.sh; run
# `set -o pipefail; bash D/exp/session33b.sh 2>&1 | tee $OUT/run.log`.
set -u
D=${D:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$D" || exit 1
source "$D/exp/certify.sh"
export PYTHONPYCACHEPREFIX=/tmp/pyc; unset PYTHONDONTWRITEBYTECODE
drop() { sync; if echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; then echo "page cache dropped"; else echo "page cache NOT dropped"; fi; }
export CUDA_CACHE_PATH=/tmp/jit-1
[ -d /tmp/pyc ] || { certify new pycwrite --quick; KEEP=1 certify new pycfull; }  # a fresh lease: byte code first
lscpu | grep -E "Model name|^CPU\(s\)|MHz" | head -4
drop; KEEP=1 certify new diskonly --quick   # page cache dropped, JIT cache kept
CUDA_CACHE_PATH=/tmp/jit-3 KEEP=1 certify new jitonly --quick   # page cache warm, JIT cache fresh
KEEP=1 certify new full3
KEEP=1 certify new full4
KEEP=1 certify new full5
