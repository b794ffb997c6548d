#!/usr/bin/env bash
# Run here (no GPU needed), from the repository root, after run-numerics.sh: fleet status and cert compare
# over the certificates the device runs wrote (this folder: the first lease; lease2/: the second, and its
# five repeats with NVIDIA_TF32_OVERRIDE=0), every signature checked with the runs' public key.
set -uo pipefail
here=envs/examples/numerics-fingerprint
pub=$here/numerics-signing.pub
lg() { python3 -m lockgen "$@"; }
echo "== fleet status $here --key $pub"
lg fleet status "$here" --key "$pub" 2>&1; echo "exit $?"
echo "== cert compare node1-quick node4-tf32-off --key $pub (the numerics line and the verdict)"
lg cert compare "$here/node1-quick.cert.json" "$here/node4-tf32-off.cert.json" --key "$pub" 2>&1 | grep -E "^numerics|^error|^hint"; echo "exit ${PIPESTATUS[0]}"
echo "== cert compare node1-quick node2-quick --key $pub --noise 0.5"
lg cert compare "$here/node1-quick.cert.json" "$here/node2-quick.cert.json" --key "$pub" --noise 0.5 2>&1 | grep -E "^numerics|^error|^hint"; echo "exit ${PIPESTATUS[0]}"
