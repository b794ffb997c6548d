#!/usr/bin/env bash
# Run on the device machine (nvidia-h200, no network), from the repository root, with lockgen's light wheels
# in .whl and a signing key in .keys/diagnosis (public half: diagnosis-signing.pub here):
#   1. a healthy node: lockgen verify --quick (3 runs) and the full run (2 runs), timed from outside;
#   2. four node faults, each certified with --quick while it lasts, each certificate naming its cause:
#      another process keeping the GPU busy (a bf16 matmul loop), another holding 120 GiB of its memory,
#      CUDA_LAUNCH_BLOCKING=1 in the environment, a library preloaded from outside the environment.
# Made here before the run (git-ignored, carried: .whl .keys):
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 ... -d .whl \
#     typer click rich markdown-it-py mdurl pygments shellingham pydantic pydantic-core annotated-types \
#     typing-extensions typing-inspection tomlkit pyyaml cryptography cffi pycparser zstandard packaging prometheus-client
#   lockgen keygen --out .keys/diagnosis
set -uo pipefail
here=envs/examples/h200-system/diagnosis
out="${OUT:-$here}"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="/tmp/site:$PWD" LOCKGEN_HOME=/tmp/lockgen-home PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=/opt/torch/.venv/bin/python3
key=.keys/diagnosis
lg() { python3 -m lockgen "$@"; }
quick() {  # NAME [env assignments...]: a quick certificate, timed from outside, its failed checks shown
  local name=$1; shift
  local started=$(date +%s.%N)
  env "$@" python3 -m lockgen verify --arch sm90 --quick --python "$PY" --key "$key" --out "$out/$name.cert.json" 2>&1 \
    | grep -E "FAIL|checks passed|^error" | cut -c1-600
  echo "   $name: $(python3 -c "import time; print(f'{time.time() - $started:.1f}')") s from outside"
  phases "$out/$name.cert.json"
}
phases() {  # the kernel's phase figures of a certificate, in seconds
  python3 -c "import json, sys; f = json.load(open(sys.argv[1]))['certificate']['figures']['phases']; print('   phases:', ' '.join(f'{k}={v[\"value\"]:.2f}' for k, v in sorted(f.items())))" "$1" 2>/dev/null
}
nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader
echo "== 1. healthy: quick x3, full x2, timed from outside"
for run in 1 2 3; do quick healthy-quick; done
for run in 1 2; do
  started=$(date +%s.%N)
  lg verify --arch sm90 --python "$PY" --key "$key" --out "$out/healthy-full.cert.json" 2>&1 | grep -E "FAIL|checks passed|^error" | cut -c1-400
  echo "   healthy-full: $(python3 -c "import time; print(f'{time.time() - $started:.1f}')") s from outside"
  phases "$out/healthy-full.cert.json"
done
echo "== 2a. another process keeps the GPU busy (bf16 matmul loop)"
$PY -c "
import time, torch
a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)
end = time.time() + 90
while time.time() < end:
    for _ in range(20): a @ a
    torch.cuda.synchronize()
" & busy=$!
sleep 8
quick busy-gpu
kill $busy; wait $busy 2>/dev/null
echo "== 2b. another process holds 120 GiB of the GPU's memory"
$PY -c "
import time, torch
held = torch.empty(120 * 2**30, dtype=torch.uint8, device='cuda')
print('holding', held.numel() // 2**30, 'GiB', flush=True)
time.sleep(90)
" & hog=$!
sleep 10
quick memory-held
kill $hog; wait $hog 2>/dev/null
echo "== 2c. a setting that serialises kernel launches"
quick launch-blocking CUDA_LAUNCH_BLOCKING=1
echo "== 2d. a library preloaded from outside the environment"
mkdir -p /tmp/preload && cp "$(ldconfig -p | awk '/libz.so.1 /{print $NF; exit}')" /tmp/preload/libz.so.1
quick preloaded-library LD_PRELOAD=/tmp/preload/libz.so.1
for name in healthy-quick healthy-full busy-gpu memory-held launch-blocking preloaded-library; do
  lg cert verify "$out/$name.cert.json" --key "$here/diagnosis-signing.pub" 2>&1 | cut -c1-200
done
