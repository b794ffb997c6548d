"""Fleets: Slurm and Kubernetes manifests, node matching, the fleet's status."""
