"""The fast path: the daily commands answered before typer, pydantic or the models are imported, when what they
need is already checked and kept (a lock's checked value, by its bytes' sha256: `adapters/lock/kept_inputs`; its
environment made and unchanged: the kept drift verdict and one stat walk). It reads exactly these command lines:

    lockgen run LOCK [--prefix DIR] [--platform P] -- CMD...
    lockgen shell LOCK [--prefix DIR] [--platform P]
    lockgen activate LOCK [--prefix DIR] [--platform P] [--shell NAME]
    lockgen materialize LOCK [--prefix DIR] [--platform P] [--json]
    lockgen check --lock LOCK --prefix DIR [--platform P] [--json]

(LOCK a lock file; for run, shell and activate also a STACK, or none for `./stack.toml`, [`--target T`]
[`--locked` or `--frozen`], where its target (named, or the one detection chose for exactly the stack's bytes on
this node's probe) has its lock found fresh for exactly the stack's and the lock's bytes: `run.kept_stack_lock`;
`check` only where the verdict of the last passing check of DIR against LOCK's bytes stands). Anything else, and
anything the kept values do not answer (a lock never parsed,
no environment made, one changed, a platform the lock lacks, an unreadable file), it leaves to the typer app with
nothing said, so every error and every other case reads and exits as it always has (an error before anything was
said, too). Once an environment is found (and said so), what follows (its activate.d scripts, the exec) is what the
typer command does, and an error there is worded by the same rules (`terminal.refusal`). `LOCKGEN_REPARSE=1` turns
it off, with the kept values (`kept_inputs.trusted`).

A `materialize` that builds (its environment not made yet) is run here too when the lock's checked value is kept
(`api.materialize.kept_lock`): the build takes that value (`materialize_steps`), every proof of it the same; an
error once the build began is worded by `terminal.refusal`, as the typer command words it (handed to the app, the
build would be done twice).

`run` and `materialize` (without `--json`) are first offered to the kept run record (`kept_run_steps`: the same
proof re-checked with the standard library alone), so this module imports no pathlib or typing before that.

It also reads `lockgen resolve [STACK] [--channel-alias NAME=PATH_OR_URL]... [--target T]... [--dry-run] [--json]`
(each value in the next word) and runs the resolve use case itself, without typer: the solve needs the models, but
not typer, click and the app's command modules (about 40 ms once the rest is imported; issue 43 item 4). An error
before anything was said goes to the typer app as above (which resolves again, and words it); one after is worded
by `terminal.refusal`, as `ui.handles_errors` words it; the results are printed by `terminal.print_resolved`, which
the typer command prints with too.

It reads `lockgen fleet status FOLDER... [--key PUB]... [--json]` likewise (in any order, each key in the next word)
and runs the use case without typer, printing by `fleet_report.print_status` as the typer command does, its failure
said by `say_error` as `ui.fail` says it (exit 1); `--html`, `--noise`, `--insecure`, a `docker://REF` and any other
form go to the typer app, and so does an error before anything was said (a folder that does not exist); from the
first line said or printed on, an error is worded by `terminal.refusal` (the report printed twice otherwise).

And it reads `lockgen verify --arch A [--python PY | --prefix DIR] [--quick] [--compile] [--allow-ptx]` with any of
the options only lockgen reads (`VERIFY_HOST_OPTIONS`), to start the verification kernel before anything else is
imported (`early_kernel_steps`); the typer app runs the command as always and takes that kernel when it is the one
it would start; `stop_started_kernel` stops one it did not take. It answers nothing itself."""

from __future__ import annotations

import os
import sys

from lockgen.cli.terminal import (
    Meter,
    emit,
    print_conforming,
    print_environment,
    print_json,
    print_resolved,
    progress,
    progress_kept,
    refusal,
    said_read,
    say,
    say_error,
    say_kept,
)

TYPE_CHECKING = False  # typing and pathlib: imported past the kept `run` (`kept_run_steps`), which needs neither
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

COMMANDS = ("run", "shell", "activate", "materialize", "check")
STACK_COMMANDS = ("run", "shell", "activate")  # a STACK, or none (./stack.toml), for these
WITH_VALUE = {"--prefix": "prefix", "--platform": "platform", "-p": "platform"}
STACK_TARGET = {"--target": "target", "-t": "target"}  # run, shell, activate: a stack's target, named
STACK_FLAGS = {"--locked": "locked", "--frozen": "frozen"}
EXTRA_WITH_VALUE = {
    "run": STACK_TARGET,
    "shell": STACK_TARGET,
    "activate": {"--shell": "shell", **STACK_TARGET},
    "check": {"--lock": "lock"},
}
FLAGS = {
    "materialize": {"--json": "json"},
    "check": {"--json": "json"},
    "run": STACK_FLAGS,
    "shell": STACK_FLAGS,
    "activate": STACK_FLAGS,
}


def _read(command: str, words: list[str]) -> tuple[str | None, dict[str, str]] | None:
    """The LOCK or STACK and the options of `words` (the command line after the command's name, before `--`), when
    they are exactly the forms this path reads: one LOCK, or for `run`, `shell` and `activate` a STACK or none
    (`./stack.toml`, unless `--prefix` names an environment to use as it is: None is then left out), each option
    once, its value in the next word; None for anything else."""
    scanned = _scan(words, {**WITH_VALUE, **EXTRA_WITH_VALUE.get(command, {})}, FLAGS.get(command, {}))
    if scanned is None:
        return None
    source, options, _ = scanned
    if command == "check":  # no LOCK word: --lock names it, and --prefix the environment
        if source is not None or "lock" not in options or "prefix" not in options:
            return None
        source = options.pop("lock")
    if source is None and (command not in STACK_COMMANDS or "prefix" in options):
        return None
    is_stack = source is None or _is_stack_word(source)
    if (is_stack and command not in STACK_COMMANDS) or ("locked" in options and "frozen" in options):
        return None
    if not is_stack and any(name in options for name in ("target", "locked", "frozen")):
        return None  # a lock with a stack's options: the typer command refuses it
    return source, options


def _is_stack_word(word: str) -> bool:
    """Whether a LOCK-or-STACK word names a stack (`run.py`'s rule: a `.toml` file or a folder)."""
    return _suffix(word) == ".toml" or os.path.isdir(word)


def _suffix(word: str) -> str:
    """The suffix `Path(word).suffix` gives, without pathlib: the last name's (empty and `.` parts dropped, as
    pathlib drops them) from its last dot, unless that dot begins or ends the name."""
    names = [part for part in word.split("/") if part not in ("", ".")]
    name = names[-1] if names else ""
    dot = name.rfind(".")
    return name[dot:] if 0 < dot < len(name) - 1 else ""


VERIFY_KERNEL_OPTIONS = {"--arch": "arch", "--python": "python", "--prefix": "prefix"}
VERIFY_KERNEL_FLAGS = {"--quick": "quick", "--compile": "compile", "--allow-ptx": "allow_ptx"}
VERIFY_HOST_OPTIONS = (
    "--expect",
    "--expect-numerics",
    "--out",
    "--key",
    "--gpus",
    "--timeout",
    "--nodes",
    "--rendezvous",
    "--rendezvous-id",
    "--emit",
    "--valid-for",
)  # what lockgen alone reads, judges with or writes: the kernel's command is the same whatever they say
VERIFY_HOST_FLAGS = ("--json", "-v", "--verbose")
# the types of `verify_cmds.verify`'s parameters (typer reads them from its annotations; tests/test_verify_early.py
# holds the two equal): a value typer cannot read is a usage error
VERIFY_NUMBERS = {"--timeout": float, "--gpus": int, "--nodes": int}


def _refused_surely(options: dict[str, str]) -> bool:
    """Whether lockgen will refuse these options whatever the inputs say (a number typer cannot read, a `--timeout`
    that is no time limit, a rendering that names the lock, which needs `--lock` and so never comes this way):
    nothing is started for a command that cannot run."""
    for name, kind in VERIFY_NUMBERS.items():
        if name in options:
            try:
                kind(options[name])
            except ValueError:
                return True
    from lockgen.model.requests import is_time_limit  # the rule `verify_cmds.verify` refuses it by

    if "--timeout" in options and not is_time_limit(float(options["--timeout"])):
        return True
    from lockgen.model.export_formats import LOCK_BOUND_FORMATS  # the rule `api.verify` refuses such a run by

    formats = (item.strip().partition("=")[0] for item in options.get("--emit", "").split(","))
    return any(fmt in LOCK_BOUND_FORMATS for fmt in formats)


def _start_verify_kernel(words: list[str]) -> None:
    """Starts `lockgen verify`'s kernel when `words` (after `verify`) are exactly the forms this path reads, and
    name neither `--lock` nor `--image`; anything else, or anything that fails, starts nothing, said nothing."""
    with_value = {**VERIFY_KERNEL_OPTIONS, **{name: name for name in VERIFY_HOST_OPTIONS}}
    flags = {**VERIFY_KERNEL_FLAGS, **{name: name for name in VERIFY_HOST_FLAGS}}
    scanned = _scan(words, with_value, flags)
    if scanned is None or scanned[0] is not None or "arch" not in scanned[1]:
        return
    options = scanned[1]
    if ("python" in options and "prefix" in options) or _refused_surely(options):
        return
    try:
        from lockgen.api.steps.early_kernel_steps import start_kernel

        start_kernel(
            options["arch"],
            options.get("python"),
            options.get("prefix"),
            "quick" in options,
            "compile" in options,
            "allow_ptx" in options,
        )
    except Exception:  # the typer command reads the line again, and words whatever is wrong with it
        return


def stop_started_kernel() -> None:
    """Stops the kernel `lockgen verify` started here when its command did not take it (it refused first, or was
    interrupted, even between the kernel's start and this module learning of it)."""
    if "lockgen.api.steps.early_kernel_steps" in sys.modules:
        from lockgen.api.steps.early_kernel_steps import stop_kernel

        stop_kernel()


def answered(args: list[str]) -> int | None:
    """The exit code of the command line `args` when this path answered it (`run` and `shell` answer by
    becoming the command); None when it leaves it to the typer app, having said nothing (for `verify`, having
    started its kernel)."""
    if args and args[0] == "resolve":
        return _resolved(args[1:])
    if args[:2] == ["fleet", "status"]:
        return _fleet_status(args[2:])
    verbose = 1 if args[:1] in (["-v"], ["--verbose"]) else 0  # `lockgen -v verify ...`
    if args[verbose : verbose + 1] == ["verify"]:
        _start_verify_kernel(args[verbose + 1 :])
        return None
    if not args or args[0] not in COMMANDS:
        return None
    command, words, after = args[0], args[1:], []
    if command == "run":
        if "--" not in words:
            return None
        at = words.index("--")
        words, after = words[:at], words[at + 1 :]
        if not after:
            return None
    elif "--" in words:
        return None
    read = _read(command, words)
    if read is None:
        return None
    source, options = read
    committed = False  # something was said, or a build begun: an error from then on is worded here, not by the app

    def commit() -> None:
        nonlocal committed
        committed = True

    def saying(message: str) -> None:
        commit()
        progress(message)

    def saying_kept(line: str) -> None:
        commit()
        progress_kept(line)

    try:
        if command == "run" and source is not None and not _is_stack_word(source):
            from lockgen.api.steps.kept_run_steps import run_kept  # the kept `run` of a lock: returns if none holds

            run_kept(source, options.get("platform"), options.get("prefix"), after, saying_kept)
        elif command == "materialize" and "json" not in options:  # the same record; --json names the lock as Path does
            assert source is not None  # `_read` gives no STACK, nor none, for materialize
            from lockgen.api.steps.kept_run_steps import materialized_kept

            found = materialized_kept(source, options.get("platform"), options.get("prefix"), saying_kept)
            if found is not None:
                progress_kept(f"environment digest sha256:{found.digest}")  # hex digits: nothing to escape
                say_kept(found.shown)
                return 0
        from pathlib import Path

        return _answer(
            command,
            None if source is None else Path(source),
            Path(options["prefix"]) if "prefix" in options else None,
            options,
            after,
            saying,
            commit,  # a build begun
        )
    except BrokenPipeError:  # the reader left: `cli.main` ends quietly, exit 1, as click ends the typer app
        raise
    except Exception as exc:
        if not committed:  # nothing said yet: the typer app decides, and words it
            return None
        message, hint, code = refusal(exc)  # after the environment was found: worded as the typer command words it
        say_error(message, hint)
        return code


def _answer(
    command: str,
    lock: Path | None,
    prefix: Path | None,
    options: dict[str, str],
    after: list[str],
    progress: Callable[[str], None],
    began: Callable[[], None],
) -> int | None:
    if command == "check":
        from lockgen.api.check import kept_check_lock

        assert prefix is not None and lock is not None  # `_read` reads `check` only with --lock and --prefix
        conforming = kept_check_lock(lock, prefix, options.get("platform"), progress)  # a passing check's verdict
        if conforming is None:
            return None
        if "json" in options:
            print_json(conforming.to_dict())
        else:
            for line in conforming.lines():
                say(line)
        said_read(conforming.where, conforming.read_every_byte)
        print_conforming(conforming, lock)
        return 0
    if command == "materialize":
        from lockgen.api.materialize import kept_lock, kept_materialized, materialize_kept

        assert lock is not None  # `_read` gives materialize its LOCK
        found = kept_materialized(lock, options.get("platform"), prefix, progress)
        if found is None:  # to be built: here when the lock's checked value is kept, by the typer command otherwise
            read = kept_lock(lock)
            if read is None:
                return None
            # begun: any error from here is worded by `answered` (as the typer app words it), never handed to the
            # app, which would fetch and build a second time (a terminal's bar says no line that would count)
            began()
            with Meter(progress) as meter:
                found = materialize_kept(read, options.get("platform"), prefix, progress, meter)
        print_environment(*found, "json" in options, {"lock": str(lock)})
        return 0
    from lockgen.api.run import Wanted, kept_exports, kept_run, kept_shell

    wanted = Wanted(
        lock, options.get("target"), options.get("platform"), prefix
    )  # a stack's: its lock found fresh, or nothing
    if command == "run":
        kept_run(wanted, after, progress)  # returns only when nothing is kept
    elif command == "shell":
        kept_shell(wanted, progress)
    else:
        exports = kept_exports(wanted, options.get("shell"), progress)
        if exports is not None:
            emit(exports)
            return 0
    return None


RESOLVE_REPEATED = {"--channel-alias": "aliases", "--target": "targets", "-t": "targets"}
RESOLVE_FLAGS = {"--dry-run": "--dry-run", "--json": "--json"}  # each flag kept by its own word


def _read_resolve(words: list[str]) -> tuple[str, dict[str, list[str]], set[str]] | None:
    """The STACK (`stack.toml` when none is named), the repeated options' values and the flags of a `resolve`
    command line in exactly the forms this path reads; None for anything else (`--check`, `--update`, `-v`, a
    value in the same word, a flag twice, a value that looks like an option)."""
    scanned = _scan(words, {}, RESOLVE_FLAGS, RESOLVE_REPEATED)
    if scanned is None:
        return None
    source, flags, repeated = scanned
    return source or "stack.toml", repeated, set(flags)


def _scan(
    words: list[str], with_value: dict[str, str], flags: dict[str, str], repeated: dict[str, str] | None = None
) -> tuple[str | None, dict[str, str], dict[str, list[str]]] | None:
    """The one source word, the options (`with_value`'s by the next word, each once; `flags` each once, as "")
    and the `repeated` options' values of a command line; None for any other form (an unknown or repeated
    option, a value that is empty or looks like an option, a second source word)."""
    scanned = _scan_sources(words, with_value, flags, repeated)
    if scanned is None or len(scanned[0]) > 1:
        return None
    sources, options, lists = scanned
    return (sources[0] if sources else None), options, lists


def _scan_sources(
    words: list[str], with_value: dict[str, str], flags: dict[str, str], repeated: dict[str, str] | None = None
) -> tuple[list[str], dict[str, str], dict[str, list[str]]] | None:
    """`_scan`'s reading with any number of source words, in their order."""
    sources: list[str] = []
    options: dict[str, str] = {}
    lists: dict[str, list[str]] = {name: [] for name in (repeated or {}).values()}
    at = 0
    while at < len(words):
        word = words[at]
        if repeated and word in repeated and at + 1 < len(words):
            value = words[at + 1]
            if not value or value.startswith("-"):
                return None
            lists[repeated[word]].append(value)
            at += 2
        elif word in with_value and at + 1 < len(words):
            value = words[at + 1]
            if with_value[word] in options or not value or value.startswith("-"):
                return None
            options[with_value[word]] = value
            at += 2
        elif word in flags and flags[word] not in options:
            options[flags[word]] = ""
            at += 1
        elif word.startswith("-") or not word:
            return None
        else:
            sources.append(word)
            at += 1
    return sources, options, lists


class _Saying:
    """A use case's progress, said as the typer command says it, remembering whether anything was said: until then
    an error is the typer app's to word (it runs the command again); from then on it is worded here (`refused`)."""

    def __init__(self) -> None:
        self.said = False

    def __call__(self, message: str) -> None:
        self.said = True
        progress(message)

    def refused(self, exc: Exception) -> int | None:
        """The exit code of `exc` worded by `terminal.refusal`, as `ui.handles_errors` words it, once something was
        said; None (nothing said) for the typer app to run the command and word it."""
        if not self.said:
            return None
        message, hint, code = refusal(exc)
        say_error(message, hint)
        return code


def _resolved(words: list[str]) -> int | None:
    """`lockgen resolve` run here: its exit code, or None (nothing said) for the typer app to run it."""
    read = _read_resolve(words)
    if read is None:
        return None
    source, repeated, flags = read
    saying = _Saying()  # once something is said, an error is worded here, not by the app (which would resolve again)

    from pathlib import Path

    from lockgen.api import resolve as api

    try:
        stack = Path(source)
        results = api.resolve(
            stack / "stack.toml" if stack.is_dir() else stack,
            repeated["targets"],
            (),
            repeated["aliases"],
            dry_run="--dry-run" in flags,
            progress=saying,
        )
    except Exception as exc:
        return saying.refused(exc)  # nothing said yet: the typer app resolves, and words what fails
    print_resolved(results, "--dry-run" in flags, "--json" in flags)
    return 0


FLEET_STATUS_REPEATED = {"--key": "keys"}
FLEET_STATUS_FLAGS = {"--json": "json"}


def _read_fleet_status(words: list[str]) -> tuple[list[str], list[str], bool] | None:
    """The folders, the `--key` files and whether `--json` was given, of a `fleet status` command line (after
    `status`) in exactly the forms this path reads: one or more folders, `--key PUB` any number of times, `--json`
    once, in any order; None for anything else (no folder, a docker://REF, `--html`, `--noise`, `--insecure`,
    `--help`, `-v`, `--key=PUB`, a flag twice, a value that is empty or looks like an option)."""
    scanned = _scan_sources(words, {}, FLEET_STATUS_FLAGS, FLEET_STATUS_REPEATED)
    if scanned is None:
        return None
    sources, flags, repeated = scanned
    if not sources or any(source.startswith("docker://") for source in sources):
        return None
    return sources, repeated["keys"], "json" in flags


def _fleet_status(words: list[str]) -> int | None:
    """`lockgen fleet status` run here: its exit code, or None (nothing said) for the typer app to run it. An error
    before anything was said goes to the app (which reads the folders again, and words it); from the first line said
    or printed on, it is worded here by `terminal.refusal`, as `ui.handles_errors` words it."""
    read = _read_fleet_status(words)
    if read is None:
        return None
    sources, keys, as_json = read
    saying = _Saying()

    import datetime as dt
    from pathlib import Path

    try:
        from lockgen.api.fleet_status import fleet_status
        from lockgen.cli.fleet_report import print_status

        now = dt.datetime.now(dt.timezone.utc)
        report = fleet_status(sources, [Path(key) for key in keys], False, 0.05, None, now, saying)
        saying.said = True  # the output begins: handed to the app, it would be printed twice
        failure = print_status(report, bool(keys), as_json)
    except BrokenPipeError:  # the reader left: `cli.main` ends quietly, exit 1, as click ends the typer app
        raise
    except Exception as exc:
        return saying.refused(exc)  # nothing said yet: the typer app reads the folders, and words what fails
    if failure is None:
        return 0
    say_error(*failure)  # as the typer command's `fail`
    return 1
