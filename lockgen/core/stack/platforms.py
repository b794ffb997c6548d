"""Which platform of a lock a command works on, pure: the one asked for, else the host's own."""

from __future__ import annotations

from lockgen.model.names import shown
from lockgen.errors import UserError


def choose_platform(lock_platforms: tuple[str, ...], wanted: str | None, native: str, machine: str) -> str:
    """`wanted` when the lock has it; else `native` (the host's platform; `machine` its `uname -m`)."""
    if wanted:
        if wanted not in lock_platforms:
            raise UserError(
                f"the lock has no platform `{shown(wanted, 60)}`", f"platforms in it: {', '.join(lock_platforms)}"
            )
        return wanted
    if native in lock_platforms:
        return native
    raise UserError(
        f"the lock covers {', '.join(lock_platforms)}, not this host's {native or machine}",
        "pass --platform to choose one",
    )
