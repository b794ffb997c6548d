"""lockgen's own input files: the lock's YAML, stack.toml, and the checked values kept per input's bytes."""
