#!/usr/bin/env bash
# The commands behind the export figures in docs/measurements.md for this example's h100 lock (torch 2.13.0+cu130 from
# PyPI, 4.6 GB): a Debian bookworm base with python3.11 (debootstrap, as root), two exports from two homes
# and umasks (same bytes), oci-image-tool validate, check --image against the lock and a bare-metal
# materialize, podman (overlay store: vfs copies the tree once per layer), a loopback registry round trip,
# and an export of the same stack with one wheel moved (numpy 2.4.6 -> 2.4.5) on the warm layer cache.
# Needs PyPI, Debian's mirror, and: apt-get install debootstrap skopeo umoci oci-image-tool podman runc docker-registry
#   bash envs/examples/torch-pypi/export-demo.sh [WORK_DIR]     (about 20 GB of disk, 15 minutes on 2 cores)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
lock="$here/locks/h100.conda-lock.yml"
work="${1:-$(mktemp -d)}"
mkdir -p "$work"
t() { local s; s=$(date +%s.%N); "$@"; echo "[time] $(echo "$(date +%s.%N) - $s" | bc) s: $*" >&2; }
digest() { python3 -c "import json,sys;print(json.load(open(sys.argv[1]+'/index.json'))['manifests'][0]['digest'])" "$1"; }

echo "== base: Debian bookworm minbase with python3.11"
if [ ! -f "$work/base/index.json" ]; then
  debootstrap --variant=minbase --include=python3.11-minimal,libpython3.11-stdlib bookworm "$work/rootfs" http://deb.debian.org/debian >/dev/null
  rm -rf "$work/rootfs/var/cache/apt/"* "$work/rootfs/var/lib/apt/lists/"*
  umoci init --layout "$work/base" && umoci new --image "$work/base:bookworm"
  umoci insert --image "$work/base:bookworm" "$work/rootfs" / >/dev/null
  umoci config --image "$work/base:bookworm" --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  umoci gc --layout "$work/base"
fi

echo "== two exports: two homes, umasks 022 and 077"
( umask 022; t env LOCKGEN_HOME="$work/home-a" lockgen export "$lock" --base "$work/base" --out "$work/img-a" )
( umask 077; t env LOCKGEN_HOME="$work/home-b" lockgen export "$lock" --base "$work/base" --out "$work/img-b" )
diff -r "$work/img-a" "$work/img-b" && echo "identical bytes: $(digest "$work/img-a")"
tag=$(python3 -c "import json,sys;print(json.load(open(sys.argv[1]+'/index.json'))['manifests'][0]['annotations']['org.opencontainers.image.ref.name'])" "$work/img-a")
oci-image-tool validate --type image --ref "name=$tag" "$work/img-a"

echo "== the image's environment against the lock, and against a bare-metal materialize on /usr/bin/python3.11"
t lockgen check --image "$work/img-a" --lock "$lock"
py=$(python3 -c "import sys; print(sys.executable)")
PATH=/usr/local/bin:/usr/bin:/bin LOCKGEN_HOME="$work/home-a" "$py" -m lockgen materialize "$lock" --prefix "$work/bare"

echo "== podman, overlay store, no network"
store="--root $work/podman/root --runroot $work/podman/runroot --storage-driver overlay"
t skopeo copy -q "oci:$work/img-a:$tag" "containers-storage:[overlay@$work/podman/root+$work/podman/runroot]localhost/torch-pypi:h100"
podman $store --runtime runc run --rm --network none --ulimit nofile=20000:20000 --ulimit nproc=32768:32768 \
  localhost/torch-pypi:h100 python -c "import os, torch; print('in the container: torch', torch.__version__, 'cuda', torch.version.cuda, 'uid', os.getuid())"
podman $store rmi -a -f >/dev/null; rm -rf "$work/podman"

echo "== loopback registry round trip"
mkdir -p "$work/registry"
printf 'version: 0.1\nstorage: {filesystem: {rootdirectory: %s}}\nhttp: {addr: 127.0.0.1:5055}\n' "$work/registry/data" > "$work/registry/config.yml"
docker-registry serve "$work/registry/config.yml" > "$work/registry/log" 2>&1 & registry=$!
trap 'kill $registry 2>/dev/null || true' EXIT
sleep 2
lockgen push "$work/img-a" docker://127.0.0.1:5055/team/torch-pypi:h100 --insecure
t lockgen check --image docker://127.0.0.1:5055/team/torch-pypi:h100 --insecure --lock "$lock"

echo "== one wheel moved (numpy 2.4.6 -> 2.4.5), exported on the warm layer cache"
mkdir -p "$work/stack2"
sed 's/^numpy = "\*"/numpy = "==2.4.5"/' "$here/stack.toml" > "$work/stack2/stack.toml"
lockgen resolve "$work/stack2/stack.toml" >/dev/null
t env LOCKGEN_HOME="$work/home-a" lockgen export "$work/stack2/locks/h100.conda-lock.yml" --base "$work/base" --out "$work/img-numpy"
echo "benchmark: python benchmarks/bench_export.py --lock $lock --changed-lock $work/stack2/locks/h100.conda-lock.yml --base $work/base"
