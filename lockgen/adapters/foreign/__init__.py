"""Other tools' lockfiles read for `lockgen import`: uv.lock, its projects and graph, pylock.toml, conda-lock."""
