"""The one error tree of lockgen.

Every failure a user can cause or fix is a `LockgenError` carrying a one-line message and a hint;
the CLI prints them as `error:` / `hint:` lines without a traceback. Third-party exceptions are
wrapped by the adapter that called the third party, with one line of context.
"""

from __future__ import annotations


class LockgenError(Exception):
    """Base of all expected failures: a message, a hint, and the exit code to use."""

    exit_code = 1

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class UserError(LockgenError):
    """Something in the user's input is wrong: spec, flags, lock contents."""


class SpecError(UserError):
    """`stack.toml` is malformed or has bad values; carries file and line when known."""

    def __init__(self, message: str, hint: str = "", path: str | None = None, line: int | None = None) -> None:
        where = f"{path}:{line}: " if path and line else (f"{path}: " if path else "")
        super().__init__(where + message, hint)
        self.path = path
        self.line = line


class TargetError(UserError):
    """A target cannot be satisfied by any CUDA its driver runs, or names an unknown arch."""


class UnsatisfiableError(UserError):
    """The solver found no set of packages for a target and platform."""


class StaleLockError(UserError):
    """A lock no longer matches its inputs."""


class LockFormatError(UserError):
    """A lock file is unreadable, of an unknown version, or tampered with."""


class ChannelError(LockgenError):
    """A channel could not be read: missing folder, unreachable server, bad index."""
