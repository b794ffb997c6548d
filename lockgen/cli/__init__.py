"""The `lockgen` command line. `main` first offers the command line to the fast path (`fast_path`: the daily
commands on what lockgen already checked, answered before typer, pydantic or the models are imported), and runs
the typer app (`app`) for everything the fast path does not answer: every case it does not fully understand, and
every error before the fast path has said anything (one after is worded there, by the typer app's rules)."""

from __future__ import annotations

import contextlib
import errno
import os
import sys

# lockgen's models are internal: skip pydantic's scan of installed plugins (about 12 ms of start-up), in the typer
# app and in the fast path's resolve alike (both import this package first)
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")


def _by_interrupt(exit_: BaseException) -> bool:
    """Whether this exit is typer's for a Ctrl-C (it turns KeyboardInterrupt into a silent exit 130)."""
    seen: BaseException | None = exit_
    while seen is not None:
        if isinstance(seen, KeyboardInterrupt):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


_STOPPED = ("SIGTERM", "SIGHUP")  # signals that end a command as Ctrl-C does
_stopped_by: int | None = None  # the signal (of `_STOPPED`) that ended this command, None for Ctrl-C or none


def _stop_cleanly(number: int, _frame: object) -> None:
    """SIGTERM (a scheduler's cancel, `kill`, a container's stop) and SIGHUP (a closed terminal) unwind the command
    as Ctrl-C does, so its clean-up runs (the temporary folders, the kernel `verify` started) instead of the
    process dying with them left behind. After one, either ends the process at once, as its default does."""
    import signal

    global _stopped_by
    _stopped_by = number
    for name in _STOPPED:  # either of them, next, ends the process at once
        if signal.getsignal(getattr(signal, name)) is _stop_cleanly:
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    raise KeyboardInterrupt


def _stop_cleanly_on_signals() -> None:
    """`_stop_cleanly` for SIGTERM and SIGHUP, where they are at their defaults: one its parent ignores (SIGHUP
    under `nohup`) stays ignored. `run` and `shell` become their command: exec gives it the defaults back, so
    every signal sent to lockgen is then the command's own."""
    import signal

    for name in _STOPPED:
        number = getattr(signal, name)
        if signal.getsignal(number) is signal.SIG_DFL:
            signal.signal(number, _stop_cleanly)


def main() -> None:
    """Runs the app. Ctrl-C, in any command, ends it with one `interrupted` line and exit 130, after the
    work's own clean-up has run (each temporary folder is removed as the interrupt unwinds its `finally`);
    SIGTERM and SIGHUP likewise, with `terminated` (exit 143) and `hung up` (129). When rattler was loaded, the
    process ends with `os._exit` after flushing: its native (tokio) threads can take the GIL while the interpreter
    finalises, which aborts Python < 3.14 at exit (CPython issue 87135; seen here in about one run in eight under
    load), after all work is done."""
    _stop_cleanly_on_signals()
    try:
        from lockgen.cli.fast_path import answered

        code: object = answered(sys.argv[1:])
        if code is None:
            from lockgen.cli.app import command, verbose_first

            args = verbose_first(sys.argv[1:])
            command(args)(args=args)  # type: ignore[operator]
            code = 0
    except SystemExit as exit_:
        code = exit_.code
        if _by_interrupt(exit_):
            code = _interrupted()
    except KeyboardInterrupt:  # before or after typer's own handling (start-up, imports)
        code = _interrupted()
    except BrokenPipeError:  # `lockgen ... | head`: the reader left; end quietly, with the code click ends the typer
        _dropped(sys.stdout)  # app's with (1), whichever path answered
        code = 1
    finally:
        if "lockgen.cli.fast_path" in sys.modules:  # `verify`'s kernel, started there, when the command refused first
            sys.modules["lockgen.cli.fast_path"].stop_started_kernel()
    try:
        code = _flushed(code)
    except KeyboardInterrupt:  # a second Ctrl-C while `interrupted` waited to be said
        code = 130
    except Exception:  # stderr cannot be written either (a full disk under `> log 2>&1`): the exit code says it
        _dropped(sys.stderr)
        code = _failed(code)
    if "rattler" in sys.modules:
        with contextlib.suppress(OSError, ValueError):  # stdout was flushed above (or could not be)
            sys.stderr.flush()
        os._exit(code if isinstance(code, int) else (0 if code is None else 1))
    raise SystemExit(code)


def _interrupted() -> int:
    """Says `interrupted` and gives the exit code of a Ctrl-C, 130 (of SIGTERM or SIGHUP: `terminated` or
    `hung up`, and 128 + the signal's number, as a shell reports a command those ended). It also keeps the
    interrupt, now handled, from ending the process by SIGINT: when the KeyboardInterrupt passed through code run
    from a string (a dataclass or namedtuple being made as a module is imported: CPython runs those through
    `PyRun_String`), CPython up to 3.13 marks it unhandled, and a process run as `python -m lockgen` is then killed
    by SIGINT at exit (seen in 4 of 25 Ctrl-Cs of a 1,500-certificate status: exit -2 after `interrupted`; the
    installed `lockgen` script exits by another way, which never reads the mark). Running any string clears that
    mark first thing (`run_eval_code_obj`); where it is not set so (3.14), this costs a few microseconds."""
    import signal

    try:  # constant words: nothing of the input is printed here
        if _stopped_by == signal.SIGTERM:
            print("terminated", file=sys.stderr)
        elif _stopped_by == signal.SIGHUP:
            print("hung up", file=sys.stderr)
        else:
            print("interrupted", file=sys.stderr)
    except (OSError, ValueError):  # a stderr that cannot be written: the exit code says it
        _dropped(sys.stderr)
    exec("", {})  # a constant empty string, run only to clear CPython's mark
    return 130 if _stopped_by is None else 128 + _stopped_by


def _flushed(code: object) -> object:
    """`code`, after stdout's last buffered output is written (Python's own final flush would meet what goes wrong
    after `main` returned, and say it as `Exception ignored ...`, exit 120, or not at all where rattler's exit skips
    it): a reader that left (`lockgen ... | head` on a short output) ends the command quietly, with 1 where it had
    succeeded, as click ends the typer app on a broken pipe; an output that cannot be written (a full disk) says so
    and fails the command; a Ctrl-C while the flush waits on a full pipe is an interrupt like any other. What was
    not written is dropped (stdout pointed at /dev/null), so nothing is said of it twice."""
    if sys.stdout is None:  # started with its stdout closed (`>&-`): nothing was printed
        return code
    try:
        sys.stdout.flush()
    except (BrokenPipeError, ConnectionResetError):  # a pipe's or a socket's reader left
        _dropped(sys.stdout)
        return _failed(code)
    except KeyboardInterrupt:
        _dropped(sys.stdout)
        return _interrupted()
    except ValueError:  # stdout closed by the command itself: nothing is buffered
        return code
    except OSError as exc:
        _dropped(sys.stdout)
        from lockgen.cli.terminal import say_error

        full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
        say_error(
            f"the output could not be written ({exc.strerror or exc})",
            "free space where the output goes, or send it elsewhere, and run the command again"
            if full
            else "check where the output goes (a file system that failed, a stdout left non-blocking), or send it "
            "elsewhere, and run the command again",
        )
        return _failed(code)
    return code


def _failed(code: object) -> object:
    """The exit code of a command that `code` ended but whose output failed: its own where it had failed, else 1."""
    return code if code not in (0, None) else 1


def _dropped(stream: object) -> None:
    """`stream` (stdout or stderr) pointed at /dev/null: it cannot be written (a reader gone, a full disk), so what
    is still buffered for it is dropped rather than met again by Python's own exit (`Exception ignored ...`, exit
    120). Nothing to drop where there is no such stream (`>&-`)."""
    fileno = getattr(stream, "fileno", None)  # None where there is no such stream
    if fileno is None:
        return
    try:
        target, null = fileno(), os.open(os.devnull, os.O_WRONLY)
    except (OSError, ValueError):
        return
    try:
        os.dup2(null, target)
    except OSError:
        pass
    finally:
        os.close(null)
