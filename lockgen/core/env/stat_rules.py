"""When a file's stat data says it is unchanged since a look, pure: the rule every kept fingerprint of lockgen
follows (an environment's record and kept verdicts: `stat_walk`, `prefix_observer`, `env_manifest`; the store's
proofs keep it too: `rattler_cache` by this function, `wheel_store` written out in its loop over 15,000 files). No
import: the fast path loads it."""

from __future__ import annotations


def ctime_stands(links_before: int | None, links_now: int, ctime_before: int, ctime_now: int) -> bool:
    """Whether a file's ctime says it was not edited since a look: the same, or moved together with its link
    count for a file that was already shared at that look (`links_before` over 1; None: not recorded, an older
    record). Making or removing a hard link of an inode moves its ctime and link count in every place that links
    it, so removing another environment that shares a wheel's or a package's files is no edit here; a moved ctime
    with the link count as it was is one, even with the size and mtime put back (git's stat rule, as lockgen's
    store keeps it: `wheel_store`, `rattler_cache`), and so is one on a file of this environment alone (a link
    count of 1 at the look: a launcher, `pyvenv.cfg`, a record), however its link count moved since, so a hard
    link made after an edit hides nothing there. What this trusts for a shared file (the store's, read-only): that
    a link made or removed is the environments' life; an edit with size and mtime put back and a link made with
    it waits for the stat trust window or a full read (docs/reference/security-model.md)."""
    return ctime_now == ctime_before or (links_before is not None and links_before > 1 and links_now != links_before)
