#!/usr/bin/env bash
# Run on the device machine (nvidia-h200, no network): the machine's own venv (/opt/torch/.venv, the vendor's
# environment, adopted as ../h200-system/locks/h200.conda-lock.yml by freeze --inventory + pin) becomes
# lockgen's image at its own path; the team stack of this folder (datasets on top, every vendor package held)
# is exported on that image, proven file by file, run, and certified on the H200 inside the team image.
#   bash envs/examples/h200-team/run-on-h200.sh           # steps 0-5, about 5 minutes
#   bash envs/examples/h200-team/run-on-h200.sh images    # steps 0-4
#   bash envs/examples/h200-team/run-on-h200.sh verify    # step 5 (on the images steps 1-2 left in /tmp)
# Made here, with PyPI, before the run (git-ignored, carried: .whl .device .keys):
#   lockgen resolve envs/examples/h200-team/stack.toml
#   LOCKGEN_HOME=.device/lockgen-home lockgen manifests envs/examples/h200-team/locks/h200.conda-lock.yml \
#     --manifests envs/examples/h200-system/locks/h200.manifests.json.gz --out envs/examples/h200-team/locks/h200.manifests.json.gz
#     (.device/lockgen-home/manifests: their RECORDs; the export proves every installed file against them)
#   UV_CACHE_DIR=.device/lockgen-home/uv-cache uv pip install --no-deps --target /tmp/x --python-version 3.12 URL...
#     (the team's three wheels, by the lock's URLs, in the uv cache lockgen runs uv with, $LOCKGEN_HOME/uv-cache;
#     used with UV_OFFLINE=1)
#   .device/wheels: uv's own wheel (lockgen installs the team's wheels with uv)
#   lockgen keygen --out .keys/h200 && mv .keys/h200 .keys/h200.key   (public half: ../h200-system/h200-2026-12-02.pub;
#     the key of the first team certificate, h200-signing.pub's, was not kept past its session)
set -uo pipefail
here=envs/examples/h200-team
sys=envs/examples/h200-system
out="${OUT:-$here}"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .device/wheels/*.whl || exit 1
export PYTHONPATH="/tmp/site:$PWD" LOCKGEN_HOME=/tmp/lockgen-home UV_OFFLINE=1
mkdir -p "$LOCKGEN_HOME" && cp -a .device/lockgen-home/manifests .device/lockgen-home/uv-cache "$LOCKGEN_HOME/"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
B=$sys/locks/h200.conda-lock.yml
BM=$sys/locks/h200.manifests.json.gz
T=$here/locks/h200.conda-lock.yml
TM=$here/locks/h200.manifests.json.gz
site=lib/python3.12/site-packages
# no package states these (uv's venv seed, the sandbox's egress-CA hook): accepted by name, hashed, recorded
allow=(--allow-foreign $site/_virtualenv.py --allow-foreign $site/_virtualenv.pth --allow-foreign $site/_sandboxing_egress_ca.pth)
lg() { python3 -m lockgen "$@"; }
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
python3 -c 'from uv import find_uv_bin; print("uv:", find_uv_bin())'
step="${1:-all}"
if [ "$step" = images ] || [ "$step" = all ]; then
  rm -rf /tmp/py-base /tmp/vendor-img /tmp/team-img /tmp/team-only
  echo "== 0. a base holding the Python the venv links to (/usr/bin/python3.12, its standard library, the libraries it"
  echo "      links), made from this host's files by tests/python_base.py: export refuses a venv image that could not start"
  /opt/torch/.venv/bin/python3 -c "from pathlib import Path; from tests.python_base import python_base; python_base(Path('/tmp/py-base'))" || exit 1
  echo "== 1. the vendor's environment as lockgen's image of its adopted lock, at its own path (proven first), on that base"
  ( time lg export "$B" --from-prefix /opt/torch/.venv --base /tmp/py-base --manifests "$BM" "${allow[@]}" --out /tmp/vendor-img ) 2>&1 | tail -4
  echo "== 2. the team image on it: the vendor's layers as they are, plus the team's wheels in /opt/torch/.venv"
  ( time lg export "$T" --base /tmp/vendor-img --out /tmp/team-img ) 2>&1 | grep -v '^hash files\|^build and compress' | tail -14
  python3 - <<'EOF'
import json
from pathlib import Path
from lockgen.adapters import oci_layout
base, _, _ = oci_layout.read_image(Path("/tmp/vendor-img"))
team, config, _ = oci_layout.read_image(Path("/tmp/team-img"))
count = len(base["layers"])
same = team["layers"][:count] == base["layers"]
added = team["layers"][count:]
print(f"vendor layers {count} ({sum(l['size'] for l in base['layers']) / 1e9:.2f} GB), reused unchanged in the team image: {same}")
print(f"team layers {len(added)}: {sum(l['size'] for l in added) / 1e6:.2f} MB; prefix {config['config']['Labels']['dev.lockgen.prefix']}")
EOF
  echo "== 3. the team image is the team lock, every file against its package's RECORD"
  ( time lg check --lock "$T" --image /tmp/team-img --manifests "$TM" "${allow[@]}" --json > "$out/check-team-image.json" ) 2>&1 | tail -5
  python3 -c "import json,sys; r=json.load(open('$out/check-team-image.json')); print({k: r[k] for k in ('clean', 'counts', 'expected_digest', 'image_digest')})"
  echo "== 4. the team's layers alone, run by the vendor's interpreter on top of its torch"
  python3 - <<'EOF'
import gzip, subprocess, tarfile
from pathlib import Path
from lockgen.adapters import oci_layout
base, _, _ = oci_layout.read_image(Path("/tmp/vendor-img"))
team, _, _ = oci_layout.read_image(Path("/tmp/team-img"))
tree = Path("/tmp/team-only")
for layer in team["layers"][len(base["layers"]):]:
    with tarfile.open(fileobj=gzip.open(oci_layout.blob_path(Path("/tmp/team-img"), layer["digest"]))) as archive:
        archive.extractall(tree, filter="tar")
site = tree / "opt/torch/.venv/lib/python3.12/site-packages"
code = ("import datasets, torch; d = datasets.Dataset.from_dict({'x': [1, 2, 3]}).with_format('torch')[:]; "
        "print('datasets', datasets.__version__, 'from', datasets.__file__); print('torch', torch.__version__, 'from', torch.__file__, 'cuda', torch.cuda.is_available(), d['x'].cuda().sum().item())")
ran = subprocess.run(["/opt/torch/.venv/bin/python3", "-c", code], env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin",
                     "HF_DATASETS_OFFLINE": "1", "HOME": "/tmp"}, capture_output=True, text=True, timeout=300)
print(ran.stdout + ran.stderr[-600:])
EOF
fi
if [ "$step" = verify ] || [ "$step" = all ]; then
  echo "== 5. certified on the H200 inside the team image, bound to the team lock (conformance first)"
  ( time lg verify --arch sm90 --lock "$T" --manifests "$TM" "${allow[@]}" --image /tmp/team-img --key .keys/h200.key --out "$out/h200-team-image.cert.json" ) 2>&1 | tail -8
  lg cert verify "$out/h200-team-image.cert.json" --key "$sys/h200-2026-12-02.pub" --lock "$T" && echo "team image certificate bound to the team lock"
  lg certs "$here" 2>&1 | tail -9
fi
