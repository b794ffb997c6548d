#!/usr/bin/env bash
# Issue 48 item 4, session 30: does a lease's slow first verify come from the page cache, and does reading the GPU
# libraries ahead (verify/page_cache.py, tree new; base = main before it) take it away? Each "cold" run follows an
# eviction of every shared library of the environment from the page cache (posix_fadvise DONTNEED).
# (The rest as session30.sh:)
# Layout as run-final.sh (one folder D, carried by the device tool): D/new/ and, optional, D/base/ (each a tree's
# lockgen/ and verify/: new = this branch, base = the tree before it, for an A/B on the same machine), D/.whl
# (lockgen's light wheels, listed in ../../run-numerics.sh), D/.keys/budget (`lockgen keygen --out D/.keys/budget`).
# Run: `bash D/exp/session30b.sh 2>&1 | tee $OUT/run.log` (this file in D/exp/), or `D=PATH bash run.sh`.
# Prints per run: rc, seconds from outside (date +%s.%N around `lockgen verify`), the kernel's own total and what
# was outside it, the phases (plan_wait: the kernel waiting for lockgen's expectations), the figures, and the seven
# digests against the earlier leases'. Then a refused verify (bad --expect) must leave no kernel process behind.
set -u
D=${D:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$D" || exit 1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT /tmp/base-certs
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LOCKGEN_HOME=/tmp/lgh PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=/opt/torch/.venv/bin/python3
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; uptime
$PY -c "import torch"  # the page cache warm for both trees alike
# the fingerprint of the earlier leases (sessions 24-25): every healthy run here must give exactly these
export REFERENCE="adamw_bf16=6bb8f0da3164 conv_bf16=b45599a785f8 gemm_bf16=7ae045e0a381 gemm_fp16=e208ce249b2b \
gemm_fp32=37cefe2f80cc gemm_fp8=f20a0184eb63 gemm_tf32=6112472e99ff"
certify() {  # TREE NAME [flags...]: lockgen verify timed from outside
  local tree=$1 name=$2; shift 2
  local cert=$OUT/$tree-$name.cert.json; [ $tree = base ] && cert=/tmp/base-certs/$name.cert.json
  local s=$(date +%s.%N)
  PYTHONPATH=/tmp/site:$D/$tree $PY -m lockgen verify --arch sm90 --python $PY --key .keys/budget "$@" --out $cert \
    > /tmp/$tree-$name.log 2>&1
  local rc=$? e=$(date +%s.%N)
  local outside=$(python3 -c "print(round($e-$s, 2))")
  printf "%-4s %-7s rc=%s %6.2f s from outside | %s\n" $tree $name $rc $outside \
    "$(grep -E 'checks passed|^error|started with lockgen' /tmp/$tree-$name.log | tr '\n' ' ' | cut -c1-400)"
  [ -f $cert ] && $PY - $cert $outside <<'PYEOF' || true
import json, os, sys
c = json.load(open(sys.argv[1]))["certificate"]
f, outside = c["figures"], float(sys.argv[2])
phases = {k: v["value"] for k, v in f["phases"].items()}
print(f"     kernel total {phases['total']:.2f} s, outside it {outside - phases['total']:.2f} s")
print("     phases", " ".join(f"{k}={v:.2f}" for k, v in sorted(phases.items())))
value = lambda group, name: (f.get(group, {}).get(name) or {}).get("value")
print("     gemm", {k: round(v["value"]) for k, v in f["gemm"].items() if v["value"] is not None},
      "conv", {k: round(v["value"]) for k, v in f["conv"].items() if v["value"] is not None},
      "fp32", value("training", "fp32_step_ms"), "bf16", value("training", "bf16_step_ms"),
      "replay", value("graphs", "bf16_replay_step_ms"))
digests = " ".join(f"{k}={v[:12]}" for k, v in sorted(c["numerics"]["digests"].items()))
print("     digests", digests, "| SAME as the earlier leases" if digests == os.environ["REFERENCE"] else "| DIFFERENT")
PYEOF
}
evict() {  # every shared library of the environment out of the page cache; prints how many GB
  $PY - <<'PYEOF'
import os, pathlib, sys
total = 0
for path in pathlib.Path(sys.prefix).rglob("*.so*"):
    if path.is_file() and not path.is_symlink():
        fd = os.open(path, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
        total += path.stat().st_size
print(f"  (evicted {total / 1e9:.2f} GB of shared libraries)")
PYEOF
}
LIBS=$($PY -c "import sys; sys.path.insert(0, '$D/new'); from verify.page_cache import library_files as f; print(' '.join(map(str, f())))")
echo "libraries read ahead: $(echo $LIBS | wc -w) files, $(du -cb $LIBS | tail -1 | cut -f1) bytes"
evict; s=$(date +%s.%N); cat $LIBS > /dev/null; echo "reading them cold with cat: $(python3 -c "print(round($(date +%s.%N)-$s, 2))") s"
command -v fincore >/dev/null && fincore $LIBS | sort -k2 -h | tail -4
evict; certify base cold1 --quick
evict; certify new cold1 --quick
evict; certify base cold2 --quick
evict; certify new cold2 --quick
certify new warm1 --quick
certify base warm1 --quick
certify new warm2 --quick
evict; certify new fullcold
certify new fullwarm
