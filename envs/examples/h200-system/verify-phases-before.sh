#!/usr/bin/env bash
# device run 1 of session 12: phase timing of the new kernel and of the kernel at 5ede390 (its verify/ copied to
# .device/before: git archive 5ede390 verify | tar -x -C .device/before), then the conv and graph failure probes
set -uo pipefail
PY=/opt/torch/.venv/bin/python3
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
mkdir -p $OUT/docs
$PY benchmarks/bench_verify_phases.py --arch sm90 --python $PY --repeats 2 --modes quick,full --before .device/before --out /tmp/docs 2>&1 | tee $OUT/phases.log
cp /tmp/docs/quick-0.json /tmp/docs/full-0.json $OUT/docs/
echo "== conv figure: healthy, untuned, cuDNN off; profiler cost"
cat > /tmp/conv_demo.py <<'PYEOF'
import json, os, sys, time, torch
from verify.results import Results
from verify.conv import conv_throughput
from verify.graphs import cuda_graphs
dev = torch.device("cuda", 0)
torch.ones(1, device=dev)
what = sys.argv[1]
r = Results()
t = time.perf_counter()
if what == "graphs":
    cuda_graphs(r, dev, quick=True)
else:
    conv_throughput(r, dev, quick=what == "quick")
print(what, os.environ.get("VERIFY_FAULT_CUDNN", ""), f"{time.perf_counter() - t:.2f} s", json.dumps({"figures": r.figures, "checks": r.checks}))
PYEOF
for w in quick full; do PYTHONPATH=$PWD $PY /tmp/conv_demo.py $w; done 2>&1 | tee -a $OUT/demos.log
for f in untuned off; do VERIFY_FAULT_CUDNN=$f PYTHONPATH=$PWD $PY /tmp/conv_demo.py full; done 2>&1 | tee -a $OUT/demos.log
echo "== graphs: healthy, then with the caching allocator off" | tee -a $OUT/demos.log
PYTHONPATH=$PWD $PY /tmp/conv_demo.py graphs 2>&1 | tail -3 | tee -a $OUT/demos.log
PYTORCH_NO_CUDA_MEMORY_CACHING=1 PYTHONPATH=$PWD timeout 120 $PY /tmp/conv_demo.py graphs 2>&1 | tail -3 | tee -a $OUT/demos.log
