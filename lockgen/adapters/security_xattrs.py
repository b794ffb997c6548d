"""Extended attributes that give a file power no mode bit shows: file capabilities (`security.capability`,
what `setcap cap_setuid+ep` writes) let a program gain root's powers when run, like setuid. No package
installs them, so a file carrying one is drift in `check --prefix` and `check --lock`. SELinux and SMACK
labels (`security.selinux`, `security.SMACK64`) are the host's policy, set on every file there, and are
not judged. A file system without extended attributes has none to find."""

from __future__ import annotations

import errno
import os

PRIVILEGED = ("security.capability",)
_NONE_HERE = (errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOENT, errno.ENODATA)


def privilege_of(path: str) -> str | None:
    """`file capabilities (security.capability)` when the file at `path` (never followed) carries one."""
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError as exc:
        if exc.errno in _NONE_HERE:
            return None
        raise
    found = [name for name in names if name in PRIVILEGED]
    return f"file capabilities ({', '.join(found)})" if found else None
