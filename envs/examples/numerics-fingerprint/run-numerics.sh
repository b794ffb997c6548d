#!/usr/bin/env bash
# The numerics fingerprint on the lent GPU (issue 48), run on the device machine (no network) from a folder
# holding this tree's lockgen/ and verify/, lockgen's light wheels in .whl and a signing key in .keys/numerics
# (public half: numerics-signing.pub here). Made here before the run (the device tool carries one folder):
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 ... -d .whl \
#     typer click rich markdown-it-py mdurl pygments shellingham pydantic pydantic-core annotated-types \
#     typing-extensions typing-inspection tomlkit pyyaml cryptography cffi pycparser zstandard packaging prometheus-client
#   lockgen keygen --out .keys/numerics
# 1. lockgen verify --quick three times (healthy: the fingerprints must agree), each timed from outside;
# 2. once more with NVIDIA_TF32_OVERRIDE=0 (only the TF32 product's digest must differ);
# 3. the full run twice, timed from outside, the second pinned to the first quick run (--expect-numerics);
# compare-here.sh, beside this, then runs fleet status and cert compare over the certificates this wrote.
set -uo pipefail
out="${OUT:-.}"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="/tmp/site:$PWD" LOCKGEN_HOME=/tmp/lockgen-home PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=/opt/torch/.venv/bin/python3
key=.keys/numerics
certs=$out/certs
mkdir -p "$certs"
lg() { python3 -m lockgen "$@"; }
certify() {  # NAME [verify flags...] [-- env assignments...]: a certificate, timed from outside
  local name=$1; shift
  local flags=() assignments=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do flags+=("$1"); shift; done
  [ $# -gt 0 ] && shift && assignments=("$@")
  local started=$(date +%s.%N)
  env "${assignments[@]}" python3 -m lockgen verify --arch sm90 --python "$PY" --key "$key" "${flags[@]}" --out "$certs/$name.cert.json" 2>&1 \
    | grep -E "FAIL|numerics/|checks passed|^error" | cut -c1-600
  local ended=$(date +%s.%N)
  echo "   $name: $(python3 -c "print(f'{$ended - $started:.2f}')") s from outside (date +%s.%N around lockgen verify)"
  python3 -c "import json, sys; c = json.load(open(sys.argv[1]))['certificate']; f = c['figures']['phases']; print('   kernel phases:', ' '.join(f'{k}={v[\"value\"]:.2f}' for k, v in sorted(f.items()))); print('   digests:', ' '.join(f'{k}={v[:12]}' for k, v in sorted((c.get('numerics') or {}).get('digests', {}).items())))" "$certs/$name.cert.json" 2>/dev/null
}
nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader
echo "== 1. healthy quick runs"
for run in 1 2 3; do certify "node$run-quick" --quick; done
echo "== 2. NVIDIA_TF32_OVERRIDE=0"
certify node4-tf32-off --quick -- NVIDIA_TF32_OVERRIDE=0
echo "== 3. full runs (the second pinned to node1's quick fingerprint)"
certify full-a
certify full-b --expect-numerics "$certs/node1-quick.cert.json"
