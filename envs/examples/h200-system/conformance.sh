#!/usr/bin/env bash
# Run on the device machine (nvidia-h200, no network): the machine's own python (/opt/torch/.venv,
# torch 2.11.0+cu130, installed by uv and pip from PyPI) is proven to be the committed lock, certified on
# its H200 bound to that lock, then exported as an OCI image, proven again, and certified inside it.
#
# How the lock was made (the inventory came from this same machine, `freeze --inventory`, no network):
#   lockgen freeze --python /opt/torch/.venv/bin/python3 --inventory h200.inventory.json.gz   (on the device)
#   lockgen pin h200.inventory.json.gz --target h200 --out locks/h200.conda-lock.yml --allow-unpublished \
#     --accept-changed lib/python3.12/site-packages/certifi/cacert.pem \
#     --accept-changed lib/python3.12/site-packages/pip/_vendor/certifi/cacert.pem       (here, with PyPI)
# 196 of 197 distributions are PyPI's wheels (RECORD equal to the wheel's, every file re-hashed on the
# node); pip 24.0 is Ubuntu's patched build (check-only, pinned by its RECORD digest); the two CA bundles
# were replaced after install (accepted by name, with the hash found).
# lockgen's light dependencies travel as wheels (.whl); the signing key as .keys/h200.key (public half:
# h200-signing.pub).
set -uo pipefail
here=envs/examples/h200-system
out="${OUT:-$here}"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="/tmp/site:$PWD" LOCKGEN_HOME=/tmp/lockgen-home
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=/opt/torch/.venv/bin/python3
L=$here/locks/h200.conda-lock.yml
M=$here/locks/h200.manifests.json.gz
key=.keys/h200.key
# no package states these, and each runs code at interpreter start: uv's venv seed (_virtualenv.py and its
# .pth) and the sandbox's egress-CA hook. They are accepted by name, hashed, and recorded in the certificate.
site=lib/python3.12/site-packages
allow=(--allow-foreign $site/_virtualenv.py --allow-foreign $site/_virtualenv.pth --allow-foreign $site/_sandboxing_egress_ca.pth)
lg() { python3 -m lockgen "$@"; }
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
echo "== 1. bare metal: the venv is the lock (every file against its package's RECORD)"
( time lg check --lock "$L" --python "$PY" --manifests "$M" "${allow[@]}" --json > "$out/check-bare-metal.json" ) 2>&1 | tail -8
echo "== 2. certify on the H200, bound to the lock (conformance first)"
( time lg verify --arch sm90 --lock "$L" --manifests "$M" "${allow[@]}" --python "$PY" --key "$key" --out "$out/h200-lock-bare-metal.cert.json" ) 2>&1 | tail -8
( time lg verify --arch sm90 --quick --lock "$L" --manifests "$M" "${allow[@]}" --python "$PY" --key "$key" --out "$out/h200-lock-quick.cert.json" ) 2>&1 | tail -7
echo "== 3. another interpreter (the system python3.12) is not the lock: refused before the kernel"
lg verify --arch sm90 --quick --lock "$L" --manifests "$M" --python /usr/bin/python3.12 --out /tmp/wrong.cert.json 2>&1 | tail -2
echo "== 4. the same environment as an OCI image (hard links, its own path), proven and certified inside"
( time lg export "$L" --from-prefix /opt/torch/.venv --manifests "$M" "${allow[@]}" --out /tmp/h200-image ) 2>&1 | tail -7
( time lg check --lock "$L" --image /tmp/h200-image --manifests "$M" "${allow[@]}" --json > "$out/check-image.json" ) 2>&1 | tail -7
( time lg verify --arch sm90 --lock "$L" --manifests "$M" "${allow[@]}" --image /tmp/h200-image --key "$key" --out "$out/h200-lock-image.cert.json" ) 2>&1 | tail -8
echo "== 5. bare metal and container: one environment digest, figures within noise"
lg cert verify "$out/h200-lock-bare-metal.cert.json" --key "$here/h200-signing.pub" --lock "$L" && echo "bare-metal certificate bound to the lock"
lg cert verify "$out/h200-lock-image.cert.json" --key "$here/h200-signing.pub" --lock "$L" && echo "image certificate bound to the lock"
lg cert compare "$out/h200-lock-bare-metal.cert.json" "$out/h200-lock-image.cert.json" 2>&1 | tail -25
lg certs "$out" 2>&1 | tail -6
