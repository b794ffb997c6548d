"""Issue 48 item 4, session 30: what the ~0.5 s of a verify outside its kernel is on the lent GPU. Prints: the
interpreter's start (-c pass), lockgen's fast path up to starting the kernel, a bare `import torch` (x3), and a
kernel-like child's teardown: from its last line (after a CUDA context and N GiB held) to its reaping.
Run: PYTHONPATH=/tmp/site:D/new PY outside.py"""
import os, subprocess, sys, time

PY = sys.executable
def timed(args, runs=3):
    out = []
    for _ in range(runs):
        s = time.perf_counter(); subprocess.run(args, check=True, capture_output=True); out.append(time.perf_counter() - s)
    return " ".join(f"{t:.3f}" for t in out)
print("python -c pass:", timed([PY, "-c", "pass"]))
print("python -S -c pass:", timed([PY, "-S", "-c", "pass"]))
print("import lockgen.cli.fast_path:", timed([PY, "-c", "import lockgen.cli.fast_path"]))
print("import torch:", timed([PY, "-c", "import torch"]))
CHILD = r'''
import os, sys, torch
x = torch.empty(int(float(sys.argv[1]) * 2**30), dtype=torch.uint8, device="cuda"); x.fill_(1); torch.cuda.synchronize()
sys.stderr.write("@written\n"); sys.stderr.flush(); os._exit(0)
'''
for gib in ("0.001", "1", "20", "60"):
    for _ in range(2):
        p = subprocess.Popen([PY, "-c", CHILD, gib], stderr=subprocess.PIPE, text=True)
        line = p.stderr.readline(); t = time.perf_counter(); p.wait(); e = time.perf_counter()
        print(f"teardown after {gib} GiB held: {1000 * (e - t):.0f} ms ({line.strip()})", flush=True)
