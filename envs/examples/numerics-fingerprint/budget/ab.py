"""Figures with and without CUBLAS_WORKSPACE_CONFIG=:4096:8 in the process (run twice, once each way)."""

import os
import torch
from verify import perf
from verify.results import Results
from verify.train import FULL, run_steps

dev = torch.device("cuda", 0)
r = Results()
perf.gemm_throughput(r, dev, True, True)
g = {k: round(v["value"]) for k, v in r.figures["gemm"].items()}
bf = run_steps(FULL, dev, "bf16", 12, ops_optimizer=True)
fused = run_steps(FULL, dev, "bf16", 12, ops_optimizer=False)
fp = run_steps(FULL, dev, "fp32", 6, ops_optimizer=True)
print(
    f"CUBLAS_WORKSPACE_CONFIG={os.environ.get('CUBLAS_WORKSPACE_CONFIG')}: gemm {g}; bf16 step {bf['step_s'] * 1000:.2f} ms (fused AdamW {fused['step_s'] * 1000:.2f}); fp32 step {fp['step_s'] * 1000:.2f} ms",
    flush=True,
)
