#!/usr/bin/env bash
# The commands that made the certificates in this folder, run on the device machine (nvidia-h200-x2:
# two H200s, driver 580.159.04) against its system python (torch 2.11.0+cu130), with expectations
# written by hand in expect.json, before that python could be locked. The certificates bound to a lock
# (h200-lock-*.cert.json, locks/h200.conda-lock.yml pinned from the machine's inventory) come from
# conformance.sh; the single-GPU ones of this script were replaced by them.
# lockgen's light dependencies travel as wheels (.whl) and the signing key as .keys/example.key.
set -euo pipefail
out="${OUT:-envs/examples/h200-system}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH="/tmp/site:$PWD"
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
lg() { python3 -m lockgen "$@"; }
key=.keys/example.key
expect=envs/examples/h200-system/expect.json
# 1. both H200s: single-GPU checks on GPU 0, then NCCL all-reduce and DDP on both (torchrun)
( time lg verify --arch sm90 --expect "$expect" --key "$key" --out "$out/h200x2-sm90.cert.json" ) 2>&1 | tail -4 || true
# 2. one H200
( time CUDA_VISIBLE_DEVICES=0 lg verify --arch sm90 --gpus 1 --expect "$expect" --key "$key" --out "$out/h200x1-sm90.cert.json" ) 2>&1 | tail -4 || true
# 3. quick mode (one GPU)
( time CUDA_VISIBLE_DEVICES=0 lg verify --arch sm90 --quick --gpus 1 --expect "$expect" --key "$key" --out "$out/h200-quick.cert.json" ) 2>&1 | tail -4 || true
# 4. degraded stacks that must fail, each naming its cause
CUDA_VISIBLE_DEVICES=0 NVIDIA_TF32_OVERRIDE=0 lg verify --arch sm90 --quick --gpus 1 --expect "$expect" --key "$key" --out "$out/degraded-tf32-off.cert.json" 2>&1 | tail -3 || true
CUDA_VISIBLE_DEVICES=0 lg verify --arch sm90 --quick --expect "$expect" --key "$key" --out "$out/degraded-hidden-gpu.cert.json" 2>&1 | tail -3 || true
# 5. a rank that dies, then a rank that hangs: lockgen names the rank, or kills every rank at the timeout
VERIFY_FAULT_EXIT_RANK=1 lg verify --arch sm90 --quick --expect "$expect" --timeout 120 --out /tmp/exit.cert.json 2>&1 | tail -2 || true
VERIFY_FAULT_HANG_RANK=1 lg verify --arch sm90 --quick --expect "$expect" --timeout 60 --out /tmp/hang.cert.json 2>&1 | tail -3 || true
pgrep -fa "verify.dist" || echo "no verify.dist process left"
# 6. torch.compile as an option (quick, one GPU)
( time CUDA_VISIBLE_DEVICES=0 lg verify --arch sm90 --quick --compile --gpus 1 --expect "$expect" --key "$key" --out "$out/h200-compiled.cert.json" --timeout 300 ) 2>&1 | tail -4 || true
lg certs "$out"
