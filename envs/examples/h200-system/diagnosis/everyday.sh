#!/usr/bin/env bash
# Run on the device machine (nvidia-h200, no network), from the repository root, with lockgen's light wheels in
# .whl: the everyday loop on a real GPU node, the one place lockgen reads the local hardware on purpose.
#   lockgen detect: which of the torch-pypi example's targets this node is (nvidia-smi's GPUs, driver, glibc), and why
#   lockgen run/activate --prefix: the machine's own venv (/opt/torch/.venv) used as it is, torch on the GPU
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="/tmp/site:$PWD" LOCKGEN_HOME=/tmp/lockgen-home PYTHONUNBUFFERED=1
lg() { python3 -m lockgen "$@"; }
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
echo "== lockgen detect envs/examples/torch-pypi/stack.toml"
lg detect envs/examples/torch-pypi/stack.toml; echo "exit $?"
lg detect envs/examples/torch-pypi/stack.toml --json | python3 -c "import json, sys; d = json.load(sys.stdin); print(d['target'], d['node']); [print(' ', t['target'], t['matches'], '; '.join(t['reasons'])[:160]) for t in d['targets']]"
echo "== lockgen detect of the quickstart's CPU-only stack on a GPU node"
lg detect envs/examples/quickstart/stack.toml; echo "exit $?"
echo "== lockgen run --prefix /opt/torch/.venv"
( time lg run --prefix /opt/torch/.venv -- python -c 'import os, sys, torch; print(sys.executable, os.environ.get("VIRTUAL_ENV"), torch.__version__, torch.cuda.get_device_name(0), (torch.ones(1024, 1024, device="cuda") @ torch.ones(1024, 1024, device="cuda")).sum().item())' ) 2>&1
lg run --prefix /opt/torch/.venv -- sh -c 'exit 7'; echo "exit $? (the command's own)"
echo "== lockgen activate --prefix /opt/torch/.venv"
lg activate --prefix /opt/torch/.venv
eval "$(lg activate --prefix /opt/torch/.venv)" && command -v python
