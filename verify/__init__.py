"""The verification kernel: runs INSIDE the environment under test, with the standard library and torch only.

`python -m verify --arch sm90` measures what this interpreter's stack really does on this machine
(versions, devices, correctness, training, performance, several GPUs, telemetry) and prints one
versioned JSON document. lockgen validates it on the host side and turns it into a certificate.
Nothing here imports lockgen or anything lockgen needs: a verifier that installs its own
dependencies changes what it verifies.
"""

SCHEMA = "lockgen.verify/1"
