"""One module per outside system: rattler, channels and their indexes, the lock file format, uv, OCI."""
