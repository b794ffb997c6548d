#!/usr/bin/env bash
# Issue 48 items 4-5, session 30: the tree with verify --quick measuring bf16 convolutions alone (new, 852a79a)
# against main before it (base, 09d209c) on one machine, timed from outside; the lease's first run has an empty
# CUDA JIT cache, and each tree runs once more with an empty one (CUDA_CACHE_PATH), as a node's first verify.
# Then full twice, quick with NVIDIA_TF32_OVERRIDE=0 (only gemm_tf32 may differ), a refused verify. Layout as
# session30.sh; run `bash D/exp/session30d.sh 2>&1 | tee $OUT/run.log`.
set -u
D=${D:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$D" || exit 1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT /tmp/base-certs
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LOCKGEN_HOME=/tmp/lgh PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=/opt/torch/.venv/bin/python3
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; uptime
$PY -c "import torch"  # the page cache warm for both trees alike
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
certify new quick1 --quick  # the lease's first: the CUDA JIT cache empty
certify base quick1 --quick  # compiles the fp16 convolutions' kernels the new tree no longer runs
certify new quick2 --quick
certify base quick2 --quick
certify new quick3 --quick
certify base quick3 --quick
CUDA_CACHE_PATH=/tmp/jc-new certify new emptyjit --quick
CUDA_CACHE_PATH=/tmp/jc-base certify base emptyjit --quick
certify new full1
certify new full2
echo "== quick with NVIDIA_TF32_OVERRIDE=0: only gemm_tf32 may differ"
NVIDIA_TF32_OVERRIDE=0 certify new tf32off --quick
echo "== a refused verify (--expect not an object) must leave no kernel behind"
echo '[1]' > /tmp/bad-expect.json
s=$(date +%s.%N)
PYTHONPATH=/tmp/site:$D/new $PY -m lockgen verify --arch sm90 --python $PY --quick --expect /tmp/bad-expect.json \
  --out /tmp/refused.cert.json > /tmp/refused.log 2>&1
echo "rc $? in $(python3 -c "print(round($(date +%s.%N)-$s, 2))") s: $(head -c 300 /tmp/refused.log | tr '\n' ' ')"
sleep 1
echo "kernels left: $(ps -eo args | grep -c '^[^ ]*python[^ ]* -m verify --arch')" \
  "(0 expected); lockgen-verify folders left in /tmp: $(ls -d /tmp/lockgen-verify-* 2>/dev/null | wc -l)"
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader
