"""In one process: model init costs, the fp32 loss trajectory, the fingerprint computed in-process (after other
work) against the child's committed digests, and GEMM figures under shorter rests."""

# ruff: noqa: E402  (CUBLAS_WORKSPACE_CONFIG is set, and each import timed, before the imports below)
import copy
import os
import time

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
t = time.monotonic()
import torch

print(f"import torch {time.monotonic() - t:.2f}", flush=True)
from verify.train import FULL, Gpt, run_steps
from verify import perf
from verify.results import Results

dev = torch.device("cuda", 0)
t = time.monotonic()
torch.zeros(1, device=dev)
torch.cuda.synchronize()
print(f"cuda init {time.monotonic() - t:.2f}", flush=True)
# correctness-like work first, with cudnn.benchmark on (state the fingerprint must not depend on)
torch.backends.cudnn.benchmark = True
a = torch.randn(1024, 1024, device=dev)
(a @ a).sum().item()
x = torch.randn(16, 64, 56, 56, device=dev, dtype=torch.bfloat16)
w = torch.randn(128, 64, 3, 3, device=dev, dtype=torch.bfloat16)
torch.nn.functional.conv2d(x, w, padding=1).sum().item()
torch.backends.cuda.matmul.allow_tf32 = True
from verify.numerics import fingerprint

for attempt in range(2):
    saved = (torch.backends.cudnn.benchmark, torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = True
    torch.use_deterministic_algorithms(True)
    t = time.monotonic()
    found = fingerprint(dev)
    el = time.monotonic() - t
    torch.use_deterministic_algorithms(False)
    torch.backends.cudnn.benchmark, torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved
    print(
        f"fingerprint in-process #{attempt} {el:.2f} s:",
        " ".join(f"{k}={v[:12]}" for k, v in sorted(found["digests"].items())),
        flush=True,
    )
# model init
for _ in range(2):
    t = time.monotonic()
    torch.manual_seed(0)
    m = Gpt(FULL)
    t1 = time.monotonic()
    c = copy.deepcopy(m)
    t2 = time.monotonic()
    c.to(dev)
    torch.cuda.synchronize()
    t3 = time.monotonic()
    print(f"Gpt(FULL) init {t1 - t:.2f} s, deepcopy {t2 - t1:.2f} s, to(cuda) {t3 - t2:.2f} s", flush=True)
# the fp32 loss trajectory and the step times
for mode, steps in (("fp32", 10), ("bf16", 10)):
    t = time.monotonic()
    run = run_steps(FULL, dev, mode, steps, ops_optimizer=True)
    el = time.monotonic() - t
    print(
        f"{mode} {steps} steps in {el:.2f} s: losses {[round(loss, 3) for loss in run['losses']]} steps_ms {run['steps_ms']} host {run['host_issue_ms']}",
        flush=True,
    )
# GEMM figures under shorter rests
original_rest = perf.rest
for rest_s in (0.15, 0.05, 0.0, 0.15, 0.05, 0.0):

    def rest(device, quick, s=rest_s):
        torch.cuda.synchronize(device)
        time.sleep(s)

    perf.rest = rest
    r = Results()
    t = time.monotonic()
    perf.gemm_throughput(r, dev, True, True)
    el = time.monotonic() - t
    print(
        f"rest {rest_s:.2f}: gemm_throughput {el:.2f} s",
        {k: (round(v["value"]), v["bursts"]) for k, v in r.figures["gemm"].items()},
        flush=True,
    )
perf.rest = original_rest
from verify.conv import conv_throughput
from verify import conv as convmod

for rest_s in (0.15, 0.0, 0.15, 0.0):

    def rest(device, quick, s=rest_s):
        torch.cuda.synchronize(device)
        time.sleep(s)

    convmod.rest = rest
    r = Results()
    t = time.monotonic()
    conv_throughput(r, dev, True, {})
    el = time.monotonic() - t
    print(
        f"rest {rest_s:.2f}: conv_throughput {el:.2f} s",
        {k: (round(v["value"]), v["bursts"]) for k, v in r.figures["conv"].items()},
        flush=True,
    )
