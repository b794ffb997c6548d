"""PyPI wheels: indexes, uv's resolver, the wheel store and mirror, RECORDs and installed distributions."""
