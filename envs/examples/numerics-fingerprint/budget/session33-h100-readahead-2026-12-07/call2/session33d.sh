#!/usr/bin/env bash
# Issue 48 item 4, session 33: session33c.sh's comparison again on the same machine, as a node's first quick (page
# cache dropped and a fresh JIT cache before each run), three pairs with the order swapped in each (pre/ first in
# pairs 1 and 3), so neither tree always runs second. Layout: see certify.sh.
set -u
D=${D:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$D" || exit 1
source "$D/exp/certify.sh"
export PYTHONPYCACHEPREFIX=/tmp/pyc; unset PYTHONDONTWRITEBYTECODE
drop() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || echo "page cache NOT dropped"; }
export CUDA_CACHE_PATH=/tmp/jit-1
[ -d /tmp/pyc ] || certify new pycwrite --quick  # a fresh lease: torch's byte code first
for i in 1 2 3; do
  order="pre new"; [ $i = 2 ] && order="new pre"
  for tree in $order; do drop; CUDA_CACHE_PATH=/tmp/jit-$tree-f$i certify $tree f$i --quick; done
done
