"""Environments: activation, confinement, conformance, drift and the expected state of a prefix."""
