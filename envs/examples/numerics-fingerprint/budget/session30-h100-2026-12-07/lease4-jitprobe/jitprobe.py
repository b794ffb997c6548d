"""Issue 48 item 4, session 30: which of the quick run's operations fill the CUDA driver's JIT cache (and cost
seconds on a node's first verify)? Each case runs in its own process with an empty CUDA_CACHE_PATH: its first call
(synchronized) against its second, and the cache entries it left. Run: PY jitprobe.py (spawns PY -c for each case).
"""
import os, subprocess, sys, tempfile, time

CASE = r'''
import contextlib, os, sys, time, torch, torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
case = sys.argv[1]
dev = torch.device("cuda"); torch.ones(1, device=dev); torch.cuda.synchronize()
def conv(dtype, bench):
    torch.backends.cudnn.benchmark = bench
    x = torch.randn(128, 256, 28, 28, device=dev, dtype=dtype).to(memory_format=torch.channels_last).requires_grad_()
    w = torch.randn(256, 256, 3, 3, device=dev, dtype=dtype).to(memory_format=torch.channels_last).requires_grad_()
    def go():
        F.conv2d(x, w, padding=1).float().square().mean().backward()
    return go
def sdpa(backend, shape=(4, 8, 256, 64), grad=False):
    q, k, v = (torch.randn(*shape, device=dev, dtype=torch.bfloat16, requires_grad=grad) for _ in range(3))
    def go():
        ctx = sdpa_kernel([backend]) if backend is not None else contextlib.nullcontext()
        with ctx:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            if grad: out.float().sum().backward()
    return go
cases = {
  "conv_bf16_bench": lambda: conv(torch.bfloat16, True), "conv_bf16_nobench": lambda: conv(torch.bfloat16, False),
  "conv_fp16_bench": lambda: conv(torch.float16, True),
  "sdpa_cudnn": lambda: sdpa(SDPBackend.CUDNN_ATTENTION), "sdpa_flash": lambda: sdpa(SDPBackend.FLASH_ATTENTION),
  "sdpa_efficient": lambda: sdpa(SDPBackend.EFFICIENT_ATTENTION),
  "sdpa_default_train": lambda: sdpa(None, (32, 8, 512, 64), True),
  "sdpa_cudnn_train": lambda: sdpa(SDPBackend.CUDNN_ATTENTION, (32, 8, 512, 64), True),
}
go = cases[case]()
times = []
for _ in range(2):
    s = time.perf_counter(); go(); torch.cuda.synchronize(); times.append(time.perf_counter() - s)
print(f"{case:22s} first {times[0]:6.3f} s  second {times[1]:6.3f} s", end="")
'''
for case in sys.argv[1:] or ["conv_bf16_bench", "conv_bf16_nobench", "conv_fp16_bench", "sdpa_cudnn", "sdpa_flash",
                             "sdpa_efficient", "sdpa_default_train", "sdpa_cudnn_train"]:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, CUDA_CACHE_PATH=cache)
        out = subprocess.run([sys.executable, "-c", CASE, case], env=env, capture_output=True, text=True)
        entries = sum(len(files) for _, _, files in os.walk(cache))
        print(out.stdout.strip() or out.stderr.strip()[-300:], f" | {entries} JIT cache entries", flush=True)
