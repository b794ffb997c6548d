"""Where the first fp32 training run's extra seconds go: each part of the first steps, synced (device run 3 of
session 12; run as `PYTHONPATH=. /opt/torch/.venv/bin/python3 envs/examples/h200-system/first-step-diag.py` from the
repository root on the H200; its output is in verify-phases-before.log)."""
import sys, time
t0 = time.perf_counter()
import torch
import torch.nn.functional as F
print(f"import {time.perf_counter() - t0:.2f}", flush=True)
from verify.train import FULL, Gpt, batch_of
dev = torch.device("cuda", 0)
def sync_t(label, fn):
    torch.cuda.synchronize(); t = time.perf_counter(); out = fn(); torch.cuda.synchronize()
    print(f"  {label:<28} {time.perf_counter() - t:7.3f} s", flush=True); return out
sync_t("cuda init", lambda: torch.ones(1, device=dev))
sync_t("fp32 matmul 8192", lambda: torch.randn(8192, 8192, device=dev) @ torch.randn(8192, 8192, device=dev))
sync_t("alloc 8 GiB (new segment)", lambda: torch.empty(8 * 2**30, dtype=torch.uint8, device=dev))
sync_t("alloc 8 GiB again (cached)", lambda: torch.empty(8 * 2**30, dtype=torch.uint8, device=dev))
torch.cuda.empty_cache()
for attempt in range(2):
    print(f"run {attempt}", flush=True)
    torch.manual_seed(0)
    model = sync_t("model build + to(cuda)", lambda: Gpt(FULL).to(dev))
    opt = sync_t("optimizer", lambda: torch.optim.AdamW(model.parameters(), lr=3e-3, fused=True, capturable=True))
    x, y = batch_of(FULL, dev, torch.Generator().manual_seed(0))
    for step in range(3):
        opt.zero_grad(set_to_none=True)
        logits = sync_t(f"step {step} forward", lambda: model(x))
        loss = sync_t(f"step {step} loss", lambda: F.cross_entropy(logits.view(-1, FULL.vocab), y.reshape(-1)))
        sync_t(f"step {step} backward", lambda: loss.backward())
        sync_t(f"step {step} optimizer", lambda: opt.step())
    del model, opt, logits, loss
