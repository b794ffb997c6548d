#!/usr/bin/env bash
# The command that made two-nodes-node{0,1}.cert.json, run on the device machine (nvidia-h200-x2), as
# certify.sh is: two `lockgen verify` processes stand in for two nodes of one H200 each and meet through
# torchrun's c10d rendezvous on 127.0.0.1. On real nodes, run the same command on each, with
# --rendezvous naming one of them and no CUDA_VISIBLE_DEVICES. Both GPUs share a host here, so NCCL
# still talks over NVLink: this shows the rendezvous path, not an inter-node network.
set -euo pipefail
out="${OUT:-envs/examples/h200-system}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH="/tmp/site:$PWD"
for i in 0 1; do
  ( time CUDA_VISIBLE_DEVICES=$i python3 -m lockgen verify --arch sm90 --quick --gpus 1 --nodes 2 \
      --rendezvous 127.0.0.1:29555 --rendezvous-id h200-two-nodes --expect envs/examples/h200-system/expect.json \
      --key .keys/example.key --out "$out/two-nodes-node$i.cert.json" ) > "/tmp/two-nodes-node$i.log" 2>&1 &
done
wait
python3 -m lockgen certs "$out"
