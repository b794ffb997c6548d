#!/usr/bin/env bash
# Run on the device machine (nvidia-h200, no network, no Slurm), from the repository root, with lockgen's
# light wheels in .whl and the signing key in .keys/h200.key (public half: h200-signing.pub). What a Slurm
# node would run as its HealthCheckProgram, on a real H200, timed against Slurm's 60 s:
#   1. lockgen fleet slurm writes the scripts for this node (bound to the machine's own lock, offline
#      manifests, the three accepted foreign files; metrics and node features into $out/fleet);
#   2. the health check as slurmd runs it (SLURMD_NODENAME set; --no-drain: there is no scontrol here),
#      healthy, then with TF32 disabled (NVIDIA_TF32_OVERRIDE=0), which must fail with its reason;
#   3. the certificates as the fleet's tools read them: node_exporter's file, NFD's, npd, JUnit; status.
# Since session 34 `cert export` refuses a signed certificate without --key, so the JUnit export and the status pass
# it; fleet-health.log is the run before that change.
set -uo pipefail
here=envs/examples/h200-system
out="${OUT:-$here}/fleet"
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="/tmp/site:$PWD" LOCKGEN_HOME=/tmp/lockgen-home PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=/opt/torch/.venv/bin/python3
site=lib/python3.12/site-packages
lg() { python3 -m lockgen "$@"; }
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
echo "== 1. the scripts"
lg fleet slurm --arch sm90 --python "$PY" --lock $here/locks/h200.conda-lock.yml --manifests $here/locks/h200.manifests.json.gz \
    --allow-foreign $site/_virtualenv.py --allow-foreign $site/_virtualenv.pth --allow-foreign $site/_sandboxing_egress_ca.pth \
    --key .keys/h200.key --nodes 1 --no-drain --certs "$out" --prom-dir "$out" --nfd-dir "$out" --out /tmp/slurm-scripts \
    --lockgen "python3 -m lockgen" || exit 1
echo "== 2. the health check, healthy"
( time SLURMD_NODENAME=h200 bash /tmp/slurm-scripts/lockgen-health.sh; echo "exit $?" ) 2>&1 | tail -6
cp "$out/h200.health.cert.json" "$out/h200-healthy.cert.json"
echo "== 2. the health check, TF32 disabled"
( time NVIDIA_TF32_OVERRIDE=0 SLURMD_NODENAME=h200 bash /tmp/slurm-scripts/lockgen-health.sh; echo "exit $?" ) 2>&1 | tail -6
cp "$out/h200.health.cert.json" "$out/h200-tf32-off.cert.json"
echo "== 3. what the fleet's tools read"
grep -E '^lockgen_certificate_passed|^lockgen_figure\{.*gemm.*bf16"' "$out/lockgen.prom" | head -3
cat "$out/lockgen"
lg cert export "$out/h200-healthy.cert.json" --format npd --key $here/h200-signing.pub; echo "npd exit $?"
lg cert export "$out/h200-tf32-off.cert.json" --format npd --key $here/h200-signing.pub; echo "npd exit $?"
lg cert export "$out/h200-healthy.cert.json" --format junit --key $here/h200-signing.pub --out "$out/h200-healthy.junit.xml" >/dev/null && head -c 300 "$out/h200-healthy.junit.xml"; echo
rm -f "$out/h200.health.cert.json"
lg fleet status "$out" --key $here/h200-signing.pub --html "$out/status.html"; echo "status exit $?"
