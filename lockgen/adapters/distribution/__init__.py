"""Registries: the OCI distribution protocol, pushes and their credentials."""
