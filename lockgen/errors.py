"""The one error tree of lockgen.

Every failure a user can cause or fix is a `LockgenError` carrying a one-line message and a hint;
the CLI prints them as `error:` / `hint:` lines without a traceback. Third-party exceptions are
wrapped by the adapter that called the third party, with one line of context.

Two branches: `UserError` (the input is wrong: spec, flags, lock, a tampered artifact) and
`HostError` (this machine or a tool lockgen drives failed: a tool missing or failing, a channel
unreachable, the verification kernel crashing). Errors carry data (the solve request, the tool,
its exit code), so no caller ever reads another module's message text.
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


class NotFoundError(UserError):
    """A server or folder holds nothing at the URL asked for (HTTP 404, no such page): an index without the
    project is told apart from one that cannot be read."""


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
    """The solver found no set of packages for one solve request (`request_label` names it; `packages`
    are the package names the solver's explanation mentions, when the adapter could tell)."""

    def __init__(
        self, message: str, hint: str = "", request_label: str = "", packages: frozenset[str] = frozenset()
    ) -> None:
        super().__init__(message, hint)
        self.request_label = request_label
        self.packages = packages


class LockFormatError(UserError):
    """A lock file is unreadable, of an unknown version, or tampered with."""


class FlagError(UserError):
    """A flag given to what does not take it (`--extra` for a pixi.lock): a usage error, exit 2 as typer's."""

    exit_code = 2


class LockFieldError(LockFormatError):
    """A field of a lock breaks its rule (`lock_fields`). Its hint is for a lock that was read; a lock about to
    be written gets the hint of the input its fields came from (`lockfile_yaml.checked_lock_text`)."""


class PackError(UserError):
    """A pack archive (`lockgen pack`) is damaged or is not its lock's: `member` names the archive member
    that was refused (empty when the archive as a whole is)."""

    def __init__(self, message: str, hint: str = "", member: str = "") -> None:
        super().__init__(message, hint)
        self.member = member


class HostError(LockgenError):
    """This machine or something lockgen drives failed, not the user's input."""


class ChannelError(HostError):
    """A channel or package index could not be read: missing folder, unreachable server, bad index."""


class ToolMissingError(HostError):
    """A program lockgen runs (skopeo, uv, an interpreter) is not installed."""

    def __init__(self, tool: str, hint: str) -> None:
        super().__init__(f"{tool} is not installed", hint)
        self.tool = tool


class ToolFailedError(HostError):
    """A program lockgen ran exited non-zero: the tool, its exit code and its last stderr line."""

    def __init__(self, what: str, tool: str, exit_code: int, last_line: str, hint: str = "") -> None:
        super().__init__(f"{what} failed ({tool} exit {exit_code}): {last_line}", hint)
        self.tool = tool
        self.tool_exit_code = exit_code
        self.last_line = last_line


class KernelError(HostError):
    """The verification kernel could not run or finish in the environment under test;
    `rendezvous_timed_out` says torchrun gave up waiting for the other nodes, `timed_out` that lockgen's
    limit ended the run."""

    rendezvous_timed_out = False
    timed_out = False


class CommandError(UserError):
    """The command `lockgen run` was given could not be started in the environment: `exit_code` is 127 when
    it is not found and 126 when it cannot run, the codes a shell gives, so a script tells them from the
    command's own failures."""

    def __init__(self, message: str, hint: str, exit_code: int) -> None:
        super().__init__(message, hint)
        self.exit_code = exit_code
