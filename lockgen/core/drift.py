"""Drift between two environment manifests, pure: files missing, extra or changed."""

from __future__ import annotations

from typing import Any

from lockgen.model.results import Drift


def manifest_drift(recorded: dict[str, Any], current: dict[str, Any]) -> Drift:
    """Files missing, extra or changed between a recorded manifest and one built from the files now."""
    before = {e["path"]: e for e in recorded["files"]}
    now = {e["path"]: e for e in current["files"]}
    return Drift(sorted(before.keys() - now.keys()), sorted(now.keys() - before.keys()),
                 sorted(p for p in before.keys() & now.keys() if before[p] != now[p]))
