"""The package store and environments made from it: installers, manifests, guards against edits."""
