"""Extended attributes that give a file power no mode bit shows: file capabilities (`security.capability`,
what `setcap cap_setuid+ep` writes) let a program gain root's powers when run, like setuid. No package
installs them, so an executable file carrying one is drift in `check --prefix` and `check --lock`. SELinux
and SMACK labels (`security.selinux`, `security.SMACK64`) are the host's policy, set on every file there, and
are not judged. A file system without extended attributes has none to find.

Capabilities act only through `execve` of the file itself, which the kernel refuses for a file with no
execute bit, root included: such a file gains nothing from them, so its attributes are not read (a
`listxattr` per file was a fifth of a first `check --lock` of 60,000 small files). A `chmod` that makes it
executable keeps the attributes but moves the file's ctime, which every kept fingerprint and verdict covers,
so the next look reads them."""

from __future__ import annotations

import errno
import os
import stat

PRIVILEGED = ("security.capability",)
_NONE_HERE = (errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOENT, errno.ENODATA)
_RUNNABLE = stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH


def privilege_of(path: str, mode: int) -> str | None:
    """`file capabilities (security.capability)` when the file at `path` (never followed), of lstat mode
    `mode`, can be run and carries one."""
    if not mode & _RUNNABLE:
        return None
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError as exc:
        if exc.errno in _NONE_HERE:
            return None
        raise
    found = [name for name in names if name in PRIVILEGED]
    return f"file capabilities ({', '.join(found)})" if found else None
