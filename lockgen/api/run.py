"""Use case `lockgen run`, `shell`, `activate` and `detect`: the everyday loop. A lock's environment is
materialized when it is not yet (`materialize_steps`: into the store's default prefix, or `--prefix`, so the
second call builds nothing), then a command runs in it, a shell opens in it, or its activation is printed
for `eval`. Given a stack and no `--target`, the target is the one this node matches (`detect`: the node's
facts against the stack's targets, `core.fleet.node_match`), and its lock the stack's `locks/<target>.conda-lock.yml`.
The activation's rules are `core.env.activation`; bash sources the activate.d scripts and the exec happens in
`adapters.env_process`."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Literal, NoReturn

from lockgen.adapters import env_process
from lockgen.adapters.lock import kept_inputs, lock_file
from lockgen.api.steps.kept_run_steps import keep_run
from lockgen.api.steps.materialize_steps import kept_made, materialized
from lockgen.core.env import activation as rules
from lockgen.core.stack.stack_layout import lock_path, target_of_lock
from lockgen.model.names import shown
from lockgen.errors import LockgenError, UserError

if TYPE_CHECKING:  # the models (pydantic): imported where a lock or stack is parsed, never on the kept path
    from lockgen.api.steps.shared_steps import Meter
    from lockgen.core.fleet.node_match import TargetFit
    from lockgen.model.inputs import LoadedStack, LockBytes
    from lockgen.model.lock import LoadedLock
    from lockgen.model.node import NodeFacts
    from lockgen.model.spec import StackSpec


@dataclass(frozen=True)
class Detection:
    """The target a node matches in a stack, and how every target fits."""

    stack: Path
    node: NodeFacts
    chosen: TargetFit
    fits: tuple[TargetFit, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "stack": str(self.stack),
            "target": self.chosen.target,
            "reasons": list(self.chosen.reasons),
            "node": self.node.model_dump(mode="json"),
            "targets": [f.as_dict() for f in self.fits],
        }


@dataclass(frozen=True)
class Activation:
    """An environment ready to run in: where, of which kind, the variables a command gets, what they change."""

    prefix: Path
    kind: rules.Kind
    name: str
    lock: Path | None
    environment: dict[str, str]
    changes: rules.Changes


def detect(stack: Path | None, node_file: Path | None = None) -> Detection:
    """The target of `stack` (default `./stack.toml`) this node matches (facts from `node_file`, else
    `$LOCKGEN_NODE_FACTS`, else probed)."""
    from lockgen.adapters.node.node_facts import node_facts
    from lockgen.adapters.lock.stack_file import read_stack

    path = _stack_path(stack)
    return _detect(path, read_stack(path).spec, node_facts(node_file))


def _detect(path: Path, spec: StackSpec, node: NodeFacts) -> Detection:
    from lockgen.core.fleet.node_match import choose, fit

    has_gpu = any(t.is_gpu for t in spec.targets)
    fits = tuple(fit(t, spec.platforms_of(t), node, has_gpu) for t in spec.targets)
    return Detection(path, node, choose(list(fits), node, str(path)), fits)


Freshness = Literal["relock", "locked", "frozen"]


@dataclass(frozen=True)
class Wanted:
    """Which environment a command asks for: a lock or stack (`source`), the stack's `target`, the lock's
    `platform`, and where it is or goes (`prefix`; alone: an existing environment). A stack's lock is first
    checked against what the stack says (`freshness`): a stale one is re-locked by `relock` (stack, target),
    which the caller gives (resolve's), refused (`locked`, or when no `relock` is given), or used as it is
    (`frozen`, which checks nothing)."""

    source: Path | None = None
    target: str | None = None
    platform: str | None = None
    prefix: Path | None = None
    freshness: Freshness = "relock"
    relock: Callable[[Path, str], object] | None = None


def activation(wanted: Wanted, progress: Callable[[str], None], meter: Meter | None = None) -> Activation:
    """The environment `wanted` names (a lock, or a stack whose `target` or detected target's lock is used),
    materialized if it is not yet; with no source, the existing environment at `prefix`."""
    lock: Path | None = None
    if wanted.source is None and wanted.prefix is not None:
        if wanted.target is not None or wanted.platform is not None:
            raise UserError(
                "--target and --platform choose a lock's environment, and none is given",
                "pass the LOCK or STACK too, or drop them to use the environment at --prefix as it is",
            )
        where, name = wanted.prefix.absolute(), wanted.prefix.absolute().name
    else:
        from lockgen.core.lock.lock_builder import LockgenMeta

        loaded = _lock_of(wanted, progress)
        lock = Path(loaded.source)
        where, _ = materialized(loaded, wanted.platform, wanted.prefix, progress, meter)
        name = LockgenMeta(loaded.lock).target or target_of_lock(lock)
    return _activated(where, name, lock, progress)


def kept_activation(wanted: Wanted, progress: Callable[[str], None], for_run: bool = False) -> Activation | None:
    """The activation of `wanted` when all of it is kept, without the models: a lock file named, or a stack (named,
    else `./stack.toml`) whose target (`--target`, or the one kept as detected on this node) has its lock found
    fresh for exactly these bytes (`kept_stack_lock`), the lock's checked value kept (`kept_inputs`), its
    environment found made and unchanged (`materialize_steps.unchanged`: the kept drift verdict and one stat walk).
    None for anything else, with nothing said: `activation` decides it, and words it when it is an error. The same
    bytes give the same environment, name, activation and lines as `activation` gives. `for_run`: the environment
    found is kept for the next `run` of the same lock file and options (`kept_run_steps.keep_run`)."""
    detected: str | None = None  # what detection said of this node, when the stack's target was detected
    if wanted.source is None or _is_stack(wanted.source):
        if wanted.source is None and wanted.prefix is not None:  # the environment at --prefix as it is: `activation`'s
            return None
        kept_stack = kept_stack_lock(wanted)
        read, detected = kept_stack if kept_stack is not None else (None, None)
    else:
        read = None if wanted.target is not None else _lock_bytes(wanted.source)
    if read is None:
        return None
    found: list[str] = []  # said only once the environment is found: detection's line comes first, as it does there
    made = kept_made(read, wanted.platform, wanted.prefix, found.append)
    if made is None:
        return None
    for line in ([detected] if detected else []) + found:
        progress(line)
    lock = Path(read.source)
    active = _activated(made.prefix, made.target or target_of_lock(lock), lock, progress)
    if for_run:
        keep_run(read, wanted.platform, wanted.prefix, made)
    return active


def _lock_bytes(path: Path) -> LockBytes | None:
    try:
        return lock_file.read(path)
    except LockgenError:
        return None


def kept_stack_lock(wanted: Wanted) -> tuple[LockBytes, str | None] | None:
    """The lock of `wanted`'s stack (named, else `./stack.toml` when it is a regular file, as `activation` requires)
    for its `--target`, else for the target kept as detected on this node for exactly the stack's file path and
    bytes (`kept_inputs.kept_detected`), read once, with the line detection said (None with `--target`), when a
    fresh verdict is kept for exactly the stack's file path and bytes, that target and the lock's bytes, and every
    other file that verdict read (a base lock) still holds the bytes it read (`kept_inputs.kept_fresh`). The node is
    probed (`node_facts.node_key`) last, once a detection and a fresh verdict are found kept, so a stack with nothing
    kept costs no probe. None otherwise, with nothing said (a stale lock, a stack never checked, a node or stack
    changed since detection: the typer command detects, re-locks, refuses or uses it as `--frozen` says). A fresh
    lock is what every freshness mode uses as it is."""
    from lockgen.adapters.lock.stack_file import read_stack_text

    if wanted.source is None and not Path("stack.toml").is_file():  # a folder (or a link to one): `_lock_of` refuses
        return None
    path = _stack_path(wanted.source)
    try:
        key = _stack_key(path, read_stack_text(path))
    except LockgenError:
        return None
    if wanted.target is not None:
        read = _kept_fresh_lock(path, key, wanted.target)
        return None if read is None else (read, None)
    detected = kept_inputs.kept_detected(key)
    fresh = {target: _kept_fresh_lock(path, key, target) for target in sorted({t for t, _ in detected.values()})}
    if not any(fresh.values()):
        return None
    from lockgen.adapters.node.node_facts import node_key

    node = node_key()
    found = None if node is None else detected.get(node)
    if found is None:
        return None
    target, said = found
    read = fresh[target]
    return None if read is None else (read, said)


def _kept_fresh_lock(path: Path, key: str, target: str) -> LockBytes | None:
    """The lock of `target` of the stack at `path` (keyed `key`), read once, when a fresh verdict is kept for exactly
    these bytes and every base lock it read still holds the bytes it read; None otherwise."""
    try:
        read = lock_file.read(lock_path(path.parent, target))
    except LockgenError:
        return None
    parents = kept_inputs.kept_fresh(key, target, read.sha256)
    if parents is None:
        return None
    for where, sha256 in parents:
        parent = _lock_bytes(Path(where))
        if parent is None or parent.sha256 != sha256:
            return None
    return read


def _stack_key(path: Path, text: str) -> str:
    """What a stack's fresh verdict is keyed by: its file's absolute path and its bytes. The path, not only the
    name: the stack's base (`extends`) and its local packages are found from its folder, so another checkout of
    the same bytes is checked on its own (a review found a second checkout's updated base lock judged by the
    first checkout's)."""
    where = str(path.absolute()).encode("utf-8", "surrogateescape")
    return hashlib.sha256(where + b"\0" + text.encode("utf-8")).hexdigest()


def _keep_fresh(stack: LoadedStack, target: str, lock: LoadedLock) -> None:
    """Keeps that `lock` is fresh for `target` of `stack` (`kept_inputs.keep_fresh`), with the base lock it was
    checked against; a team stack on a base stack or on an image's lock is not kept (the base's own bytes, or
    the image's, are not what this command read), nor a stack with a local package (its folder's files decide
    its freshness, and they are not among the bytes the verdict is keyed by)."""
    if _has_local_package(stack.spec):
        return
    parents: list[tuple[str, str]] = []
    if stack.base is not None:
        if not stack.base.is_lock or stack.base.kind == "image" or stack.base_lock is None:
            return
        parents.append((str(Path(stack.base_lock.source).absolute()), stack.base_lock.sha256))
    kept_inputs.keep_fresh(_stack_key(stack.path, stack.text), target, lock.sha256, parents)


def _has_local_package(spec: StackSpec) -> bool:
    return any(dependency.path is not None for dependency in spec.pypi_dependencies)


def _activated(where: Path, name: str, lock: Path | None, progress: Callable[[str], None]) -> Activation:
    """The activation of the environment at `where` (named `name`, of `lock` when one made it)."""
    kind = env_process.environment_kind(where)
    if kind is None:
        raise UserError(
            f"{where} is not an environment (no conda-meta/, no pyvenv.cfg)",
            "pass the prefix of a conda environment or venv, or a LOCK to materialize",
        )
    calling = env_process.calling_environment()
    environment = rules.activated(kind, PurePosixPath(where), name, calling)
    if kind == "conda" and env_process.activate_scripts(where):
        after, said = env_process.sourced_environment(where, environment)
        for line in said.splitlines():
            progress(line)
        environment = rules.sourced(environment, after)
    return Activation(where, kind, rules.prompt_name(name), lock, environment, rules.changes(calling, environment))


def run(
    wanted: Wanted, command: Sequence[str], progress: Callable[[str], None], meter: Meter | None = None
) -> NoReturn:
    """Replaces lockgen with `command` in the environment (its exit status and signals are the command's)."""
    env_process.exec_command(list(command), activation(wanted, progress, meter).environment)


def kept_run(wanted: Wanted, command: Sequence[str], progress: Callable[[str], None]) -> None:
    """`run`, when all of the environment is kept (`kept_activation`); returns, having said nothing, otherwise."""
    active = kept_activation(wanted, progress, for_run=True)
    if active is not None:
        env_process.exec_command(list(command), active.environment)


def shell(wanted: Wanted, progress: Callable[[str], None], meter: Meter | None = None) -> NoReturn:
    """Replaces lockgen with `$SHELL` (else bash) in the environment, its prompt marked `(lockgen:NAME)`."""
    program = _shell_program()
    _exec_shell(program, activation(wanted, progress, meter))


def kept_shell(wanted: Wanted, progress: Callable[[str], None]) -> None:
    """`shell`, when all of the environment is kept and a shell is found; returns, having said nothing, otherwise."""
    try:
        program = _shell_program()
    except LockgenError:  # no shell: `shell` says so
        return
    active = kept_activation(wanted, progress)
    if active is not None:
        _exec_shell(program, active)


def _shell_program() -> str:
    from lockgen.adapters.tool_runner import find_tool  # subprocess: not for run

    return env_process.login_shell() or find_tool("bash", "install bash, or set SHELL to your shell")


def _exec_shell(program: str, active: Activation) -> NoReturn:
    kind = rules.shell_kind(program)
    environment = dict(active.environment)
    if kind is not None:  # the activation again after the user's rc files (lockgen/data/shell/)
        environment["LOCKGEN_ACTIVATE"] = rules.exports(active.changes, kind)
    env_process.exec_shell(program, kind, environment, f"lockgen:{active.name}")


def exports(wanted: Wanted, shell_name: str | None, progress: Callable[[str], None], meter: Meter | None = None) -> str:
    """The activation as lines for `eval` in `shell_name` (default: `$SHELL`'s kind, else bash)."""
    kind = _export_kind(shell_name)  # a shell lockgen cannot write for is refused before anything is made
    return rules.exports(activation(wanted, progress, meter).changes, kind)


def kept_exports(wanted: Wanted, shell_name: str | None, progress: Callable[[str], None]) -> str | None:
    """`exports`, when the shell is known and all of the environment is kept; None, having said nothing, otherwise."""
    try:
        kind = _export_kind(shell_name)
    except UserError:
        return None
    active = kept_activation(wanted, progress)
    return None if active is None else rules.exports(active.changes, kind)


def _export_kind(shell_name: str | None) -> rules.Shell:
    kind = rules.shell_kind(shell_name) if shell_name else rules.shell_kind(env_process.login_shell() or "") or "bash"
    if kind is None:
        raise UserError(
            f"lockgen writes activations for bash, zsh and fish, not `{shown(shell_name or '', 40)}`",
            "pass --shell bash, zsh or fish",
        )
    return kind


def _stack_path(stack: Path | None) -> Path:
    path = stack or Path("stack.toml")
    return path / "stack.toml" if path.is_dir() else path


def _is_stack(source: Path) -> bool:
    return source.suffix == ".toml" or source.is_dir()


def _lock_of(wanted: Wanted, progress: Callable[[str], None]) -> LoadedLock:
    """The lock `wanted.source` names, read once: a lock itself, or a stack's lock for `wanted.target` (detected
    when not given), fresh by what the stack says unless `frozen` (re-locked, or refused when `locked`)."""
    from lockgen.adapters.lock.lockfile_yaml import read_lock

    source, target = wanted.source, wanted.target
    if source is None and not Path("stack.toml").is_file():
        raise UserError(
            "no LOCK or STACK given, and no stack.toml in this folder",
            "lockgen run LOCK -- CMD, or lockgen run STACK -- CMD (--prefix DIR: an existing environment)",
        )
    if source is not None and not _is_stack(source):
        if target is not None:
            raise UserError(
                f"--target chooses a stack's lock, and {source} is a lock", "drop --target, or pass the stack"
            )
        return read_lock(source)
    from lockgen.adapters.node.node_facts import keyed_node_facts  # a stack's: a lock given needs neither
    from lockgen.adapters.lock.stack_file import read_stack
    from lockgen.core.fleet.node_match import node_summary

    path = _stack_path(source)
    stack = read_stack(path)
    spec = stack.spec
    if target is None:
        node, node_key = keyed_node_facts()
        found = _detect(path, spec, node)
        target = found.chosen.target
        said = f"this node ({node_summary(found.node)}) is target {target}: {', '.join(found.chosen.reasons)}"
        progress(said)
        if stack.base is None and not _has_local_package(spec):
            # kept only where a fresh verdict can be (`_keep_fresh`): a base stack's targets and rules are bytes
            # this key does not cover, and a detection kept for a stack never answered from kept values would only
            # cost the next run a probe of the node
            kept_inputs.keep_detected(_stack_key(path, stack.text), node_key, target, said)
    elif target not in {t.name for t in spec.targets}:
        raise UserError(f"no target `{target}` in {path}", f"its targets: {', '.join(t.name for t in spec.targets)}")
    lock = lock_path(path.parent, target)
    if not lock.is_file():
        raise UserError(f"target `{target}` of {path} has no lock yet ({lock})", f"lockgen resolve {path}")
    loaded = read_lock(lock)
    if wanted.freshness == "frozen":
        return loaded
    from lockgen.api.steps.stack_steps import stated_staleness

    reasons = stated_staleness(stack, next(t for t in spec.targets if t.name == target), loaded)
    if not reasons:
        _keep_fresh(stack, target, loaded)  # the next run of these bytes knows it without parsing the stack
        return loaded
    said = "; ".join(reason.detail for reason in reasons)
    if wanted.freshness == "locked" or wanted.relock is None:
        raise UserError(
            f"the lock of target `{target}` is stale: {said} ({lock})",
            f"lockgen resolve {path} --target {target} re-locks it; without --locked, lockgen re-locks it before "
            "it runs; --frozen uses it as it is",
        )
    progress(f"{lock} is stale ({said}): re-locking target {target}")
    wanted.relock(path, target)
    return read_lock(lock)
