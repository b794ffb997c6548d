#!/usr/bin/env bash
# The OS base of the platform image, as an OCI layout: Debian bookworm (Essential packages), Debian's
# python3.11 (the platform venv runs on /usr/bin/python3.11), libstdc++ (manylinux wheels such as pyzmq
# link it from the system), OpenSSH's server and client, and user 1000
# (`dev`, home /home/dev, shell /bin/bash), which the images run as. No SSH host keys: each container makes
# its own at start (the team stack's ssh service), so no two containers share one.
# Needs root (or mmdebstrap's --mode=unshare), Debian's mirror, and: apt-get install mmdebstrap umoci
#   bash envs/examples/team-jupyter/os-base.sh OUT_LAYOUT     (about 20 s and 60 MB on 2 cores)
# SOURCE_DATE_EPOCH fixes the tar's times; the layer still depends on the mirror's package versions that day.
set -euo pipefail
out="${1:?usage: os-base.sh OUT_LAYOUT}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-1735689600}"  # 2025-01-01
mmdebstrap --quiet --variant=essential --include=python3.11-minimal,libpython3.11-stdlib,libstdc++6,openssh-server \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --customize-hook='rm -f "$1"/etc/ssh/ssh_host_*' \
  --customize-hook='echo "dev:x:1000:1000:dev:/home/dev:/bin/bash" >> "$1/etc/passwd"' \
  --customize-hook='echo "dev:x:1000:" >> "$1/etc/group"; echo "dev:*:20000:0:99999:7:::" >> "$1/etc/shadow"' \
  --customize-hook='mkdir -p "$1/home/dev" && chown 1000:1000 "$1/home/dev" && chmod 0755 "$1/home/dev"' \
  bookworm "$work/rootfs.tar" "$mirror"
rm -rf "$out"
umoci init --layout "$out"
umoci new --image "$out:bookworm"
umoci raw add-layer --history.created 1970-01-01T00:00:00Z --history.created_by "mmdebstrap bookworm (os-base.sh)" --image "$out:bookworm" "$work/rootfs.tar"
umoci config --image "$out:bookworm" --history.created 1970-01-01T00:00:00Z --created 1970-01-01T00:00:00Z \
  --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
umoci gc --layout "$out"
echo "$out:bookworm"
