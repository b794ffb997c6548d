#!/usr/bin/env bash
# The second lease, after run-numerics.sh (lease2-*.cert.json, run-numerics.log) gave node4 the healthy TF32
# digest although its kernel measured TF32 at FP32 speed: on the same warm machine, diag_tf32.py (the
# deterministic child alone, three processes each with and without NVIDIA_TF32_OVERRIDE=0: diag_tf32.log),
# then `python -m verify --quick` three times with the override (all three: gemm_tf32 = gemm_fp32's bits), then
# this: lockgen verify --quick with the override five times (tf32-repeat.log, lease2-tf32-off-repeatN.cert.json).
# Run from the folder run-numerics.sh runs in (lockgen/, verify/, .whl, .keys/numerics).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD LOCKGEN_HOME=/tmp/lockgen-home NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$OUT/c"
for i in 1 2 3 4 5; do
  s=$(date +%s.%N)
  NVIDIA_TF32_OVERRIDE=0 python3 -m lockgen verify --arch sm90 --quick --python /opt/torch/.venv/bin/python3 --key .keys/numerics --out "$OUT/c/tf32-off-$i.cert.json" >/dev/null 2>&1
  e=$(date +%s.%N)
  python3 -c "import json; d=json.load(open('$OUT/c/tf32-off-$i.cert.json'))['certificate']; n=d['numerics']['digests']; print('lockgen verify --quick, override=0, run $i:', 'fp32', n['gemm_fp32'][:12], 'tf32', n['gemm_tf32'][:12], 'tf32 rate', d['figures']['gemm']['tf32']['value'], round($e-$s,2), 's from outside')"
done 2>&1 | tee "$OUT/tf32-repeat.log"
