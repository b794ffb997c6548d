"""Why NVIDIA_TF32_OVERRIDE=0 changed the TF32 digest in one lease and not in another: the child's
fingerprint with and without the override, several processes each, and a TF32 rate in the same process.
Formatted with ruff after it ran (the same statements)."""

import json
import os
import subprocess
import sys
import time


def child(extra):
    env = {**os.environ, "CUBLAS_WORKSPACE_CONFIG": ":4096:8", **extra}
    code = "import verify.determinism as d; d.child('cuda', False)"
    out = subprocess.run(
        [sys.executable, "-c", code], input="go\n", capture_output=True, text=True, env=env
    ).stdout.splitlines()[-1]
    d = json.loads(out)["fingerprint"]["digests"]
    return {k: d[k][:12] for k in ("gemm_fp32", "gemm_tf32")}


def rate(extra):
    code = r"""
import torch, time, hashlib, ctypes
torch.backends.cuda.matmul.allow_tf32 = True
g = torch.Generator(device="cuda").manual_seed(48)
a = torch.randn(4096, 4096, generator=g, device="cuda"); b = torch.randn(4096, 4096, generator=g, device="cuda")
c = a @ b; torch.cuda.synchronize()
h = c.cpu(); print("tf32 digest (no deterministic settings)", hashlib.sha256((ctypes.c_char * (h.numel()*4)).from_address(h.data_ptr())).hexdigest()[:12])
x = torch.randn(8192, 8192, device="cuda")
for _ in range(3): x @ x
torch.cuda.synchronize(); t = time.perf_counter()
for _ in range(10): x @ x
torch.cuda.synchronize(); print("tf32 8192 rate TFLOP/s", round(10 * 2 * 8192**3 / (time.perf_counter() - t) / 1e12))
"""
    env = {**os.environ, **extra}
    print(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env).stdout.strip())


for label, extra in (
    ("plain", {}),
    ("override=0", {"NVIDIA_TF32_OVERRIDE": "0"}),
    ("override=0 lt", {"NVIDIA_TF32_OVERRIDE": "0", "TORCH_BLAS_PREFER_CUBLASLT": "1"}),
):
    for run in range(3):
        started = time.perf_counter()
        print(label, run, child(extra), f"{time.perf_counter() - started:.1f} s", flush=True)
    print(label, end=" ")
    rate(extra)
