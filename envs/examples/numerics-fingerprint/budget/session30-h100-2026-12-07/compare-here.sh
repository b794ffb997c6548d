#!/usr/bin/env bash
# Run here (no GPU needed), from the repository root: fleet status and cert compare over this folder's certificates
# (signed over their own bytes, `"signed": "file-bytes"`), every signature checked with the runs' public key.
set -uo pipefail
here=envs/examples/numerics-fingerprint/budget/session30-h100-2026-12-07
pub=envs/examples/numerics-fingerprint/budget/budget-signing.pub
export LOCKGEN_HOME="$(mktemp -d)"
echo "== fleet status $here $here/lease1-09d209c --key $pub"
python3 -m lockgen fleet status "$here" "$here/lease1-09d209c" --key "$pub" 2>&1; echo "exit $?"
echo "== cert compare new-quick2 new-tf32off --key $pub (the numerics line)"
python3 -m lockgen cert compare "$here/new-quick2.cert.json" "$here/new-tf32off.cert.json" --key "$pub" 2>&1 | grep -E "^numerics|^error|^hint"; echo "exit ${PIPESTATUS[0]}"
echo "== cert compare new-quick2 new-quick3 --key $pub --noise 0.5"
python3 -m lockgen cert compare "$here/new-quick2.cert.json" "$here/new-quick3.cert.json" --key "$pub" --noise 0.5 2>&1 | grep -E "^numerics|^error|^hint"; echo "exit ${PIPESTATUS[0]}"
rm -rf "$LOCKGEN_HOME"
