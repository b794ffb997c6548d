"""Other tools' lockfiles read for `lockgen import`, one module per format behind one interface
(`foreign_format.ForeignFormat`), listed once in `foreign_locks.FORMATS`: @EXPLICIT, pylock.toml, uv.lock (its TOML,
projects and graph), pixi.lock, conda-lock.yml."""
