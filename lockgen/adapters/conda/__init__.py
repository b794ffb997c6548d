"""Conda packages: channels, rattler's solver and cache, the archives and what they install."""
