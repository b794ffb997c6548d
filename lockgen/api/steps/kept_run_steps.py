"""A step of `run`: the kept `run`, the one answer the fast path gives with its imports cut to the interpreter's
own and a SHA-256 (`stat_digest.sha256`): a lock file's environment found made and unchanged by its kept record
(`kept_runs`: the same proof the full fast path takes, re-checked in full), its activation's variables
(`activation_vars`), and lockgen replaced by the command (`env_process.exec_command`: its exit status and signals
are the command's). The record is kept (`keep_run`) after the full fast path found the environment, for an
environment whose activation is its variables alone (no activate.d scripts: those are sourced by bash, the full
path's work). A repeated `materialize` of the same lock file and options stands on the same record
(`materialized_kept`)."""

from __future__ import annotations

from lockgen.adapters import env_process
from lockgen.adapters.proof import kept_runs
from lockgen.core.env.activation_vars import activated

TYPE_CHECKING = False  # typing, pathlib and the models: not imported on this path
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from lockgen.api.steps.materialize_steps import Made
    from lockgen.model.inputs import LockBytes


def run_kept(
    lock: str, platform: str | None, prefix: str | None, command: Sequence[str], said: Callable[[str], None]
) -> None:
    """Replaces lockgen with `command` in the environment of the lock file `lock` (`--platform`, `--prefix` as
    given) when its kept record holds, having said so (`said`: a line escaped when it was kept); returns, having
    said and done nothing, otherwise."""
    found = kept_runs.found(lock, platform, prefix)
    if found is None:
        return
    said(found.said)
    env_process.exec_command(
        list(command), activated(found.kind, found.prefix, found.name, env_process.calling_environment())
    )


def materialized_kept(
    lock: str, platform: str | None, prefix: str | None, said: Callable[[str], None]
) -> kept_runs.KeptRun | None:
    """A repeated `materialize` of the lock file `lock` (`--platform`, `--prefix` as given) when its kept record
    holds: the environment found, having said so; None, having said and done nothing, otherwise."""
    found = kept_runs.found(lock, platform, prefix)
    if found is not None:
        said(found.said)
    return found


def keep_run(lock: LockBytes, platform: str | None, prefix: Path | None, made: Made) -> None:
    """Keeps the record of the environment of `lock` that the full fast path just found (`made`), for `run` and
    `materialize` with this `--platform` and `--prefix`: only when the drift verdict that proves it is confirmed
    again here, with its files unchanged across that look, and the environment is one `run` activates by its
    variables alone (a conda environment without activate.d scripts, or a venv). Costs a second stat walk, once
    per record."""
    from pathlib import Path

    from lockgen.adapters.proof import conformance_store
    from lockgen.adapters.proof.stat_digest import stamps_digest
    from lockgen.api.steps.materialize_steps import found_line, found_unchanged
    from lockgen.core.stack.stack_layout import target_of_lock
    from lockgen.model.names import escaped

    if made.editable:  # its record is keyed by the lock's bytes and name, not its folder
        return
    given = None if prefix is None else str(prefix)
    if kept_runs.standing(lock.sha256, Path(lock.source).name, platform, given):
        return
    final = made.prefix
    kind = env_process.environment_kind(final)
    if kind is None or env_process.activate_scripts(final):
        return
    files = conformance_store.drift_records(final)
    before = kept_runs.identities(*files)
    proven = found_unchanged(final, lock.sha256, platform)
    read_at = conformance_store.byte_trust(final, "").read
    after = kept_runs.identities(*files)
    verdict, read = before
    if (
        proven is None
        or proven.links_moved != 0
        or read_at is None
        or verdict is None
        or read is None
        or after != before
    ):
        # the record stands for a walk exactly the verdict's (no link count moved since: the full path renews those)
        return
    name = made.target or target_of_lock(Path(lock.source))
    found = kept_runs.KeptRun(
        str(final), kind, name, proven.environment_digest, escaped(found_line(final)), escaped(str(final))
    )
    walked = proven.walk
    kept_runs.keep(
        lock.sha256,
        Path(lock.source).name,
        platform,
        given,
        found,
        (walked.digest, stamps_digest(walked.stamps)),
        files,
        (verdict, read),
        read_at,
    )
