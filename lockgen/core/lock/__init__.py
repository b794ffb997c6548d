"""The lock's rules: every `lockgen.*` key, fields, freshness, diffs and renderings."""
