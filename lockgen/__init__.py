"""lockgen: reproducible GPU software-stack lockfiles (resolve, materialize, export, verify)."""

__version__ = "0.1.0"
