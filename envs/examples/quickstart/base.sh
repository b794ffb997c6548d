#!/usr/bin/env bash
# The walk-through's base image, as an OCI layout: Debian bookworm (Essential packages), Debian's python3.11,
# which the quickstart venv runs on (`lockgen export --base` points it at /usr/bin/python3.11 and proves the
# file is there), and libstdc++ (manylinux wheels link it from the system). Built, not pulled; any image with
# /usr/bin/python3.11 or /usr/local/bin/python3.11 does as well (docker://docker.io/library/python:3.11-slim).
# Needs root (or mmdebstrap's --mode=unshare), Debian's mirror, and: apt-get install mmdebstrap umoci
#   bash envs/examples/quickstart/base.sh OUT_LAYOUT     (about 20 s and 30 MB)
set -euo pipefail
out="${1:?usage: base.sh OUT_LAYOUT}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-1735689600}"  # 2025-01-01: fixed tar times
mmdebstrap --quiet --variant=essential --include=python3.11-minimal,libpython3.11-stdlib,libstdc++6 \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/doc/*' bookworm "$work/rootfs.tar" "${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
rm -rf "$out"
umoci init --layout "$out"
umoci new --image "$out:bookworm"
umoci raw add-layer --history.created 1970-01-01T00:00:00Z --image "$out:bookworm" "$work/rootfs.tar"
umoci config --image "$out:bookworm" --created 1970-01-01T00:00:00Z --history.created 1970-01-01T00:00:00Z \
  --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
umoci gc --layout "$out"
