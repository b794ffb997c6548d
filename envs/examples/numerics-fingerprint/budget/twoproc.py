"""Time to import torch and start CUDA, in one process alone and in two at once (the kernel and its child)."""

import subprocess
import sys
import time

CODE = "import time; t0=time.monotonic(); import torch; t1=time.monotonic(); torch.zeros(1, device='cuda'); torch.cuda.synchronize(); t2=time.monotonic(); import verify.numerics, verify.train; t3=time.monotonic(); print(f'import {t1-t0:.2f} cuda {t2-t1:.2f} verify {t3-t2:.2f}')"


def run(n):
    started = time.monotonic()
    ps = [subprocess.Popen([sys.executable, "-c", CODE], stdout=subprocess.PIPE, text=True) for _ in range(n)]
    outs = [p.communicate()[0].strip() for p in ps]
    return f"{n} at once: wall {time.monotonic() - started:.2f} s; " + " | ".join(outs)


for n in (1, 2, 1, 2):
    print(run(n), flush=True)
