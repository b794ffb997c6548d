"""Certificates: what verify measured against its envelopes, numerics, causes, formats, attestations."""
