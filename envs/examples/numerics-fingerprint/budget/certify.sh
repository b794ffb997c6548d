# Sourced by the budget evidence scripts from session 32 on (the earlier ones carry their own copy, as they ran):
# the device's set-up and `certify TREE NAME [flags...]`, one `lockgen verify` of tree D/TREE timed from outside
# (`date +%s.%N` around the command), printed with the kernel's phases, its figures and whether its numerics digests
# are the ones every healthy H100 and H200 run has given. KEEP=1 keeps the certificate in $OUT.
# Layout: D/TREE (lockgen/ and verify/ from `git archive`), D/.whl (the light wheels of ../run-numerics.sh),
# D/.keys/budget (a `lockgen keygen` key whose public half is committed beside the evidence); this file itself goes to
# D/exp/, beside the scripts that source it.
OUT=${OUT:-/tmp/out}; mkdir -p $OUT /tmp/base-certs
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LOCKGEN_HOME=/tmp/lgh PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=/opt/torch/.venv/bin/python3
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; uptime
export REFERENCE="adamw_bf16=6bb8f0da3164 conv_bf16=b45599a785f8 gemm_bf16=7ae045e0a381 gemm_fp16=e208ce249b2b \
gemm_fp32=37cefe2f80cc gemm_fp8=f20a0184eb63 gemm_tf32=6112472e99ff"
certify() {  # TREE NAME [flags...]: lockgen verify timed from outside
  local tree=$1 name=$2; shift 2
  local cert=/tmp/base-certs/$tree-$name.cert.json; [ -n "${KEEP:-}" ] && cert=$OUT/$tree-$name.cert.json
  local s=$(date +%s.%N)
  PYTHONPATH=/tmp/site:$D/$tree $PY -m lockgen verify --arch sm90 --python $PY --key .keys/budget "$@" --out $cert \
    > /tmp/$tree-$name.log 2>&1
  local rc=$? e=$(date +%s.%N)
  local outside=$(python3 -c "print(round($e-$s, 2))")
  printf "%-4s %-8s rc=%s %6.2f s from outside | %s\n" $tree $name $rc $outside \
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
      "replay", value("graphs", "bf16_replay_step_ms"), "tf32", value("training", "tf32_step_ms"))
digests = " ".join(f"{k}={v[:12]}" for k, v in sorted(c["numerics"]["digests"].items()))
print("     digests", digests, "| SAME as the earlier leases" if digests == os.environ["REFERENCE"] else "| DIFFERENT")
PYEOF
}
