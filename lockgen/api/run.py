"""Use case `lockgen run`, `shell`, `activate` and `detect`: the everyday loop. A lock's environment is
materialized when it is not yet (`materialize_steps`: into the store's default prefix, or `--prefix`, so the
second call builds nothing), then a command runs in it, a shell opens in it, or its activation is printed
for `eval`. Given a stack and no `--target`, the target is the one this node matches (`detect`: the node's
facts against the stack's targets, `core.node_match`), and its lock the stack's `locks/<target>.conda-lock.yml`.
The activation's rules are `core.activation`; bash sources the activate.d scripts and the exec happens in
`adapters.env_process`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, NoReturn

from lockgen.adapters import env_process
from lockgen.adapters.lockfile_yaml import read_lock
from lockgen.adapters.tool_runner import find_tool
from lockgen.api.steps.materialize_steps import materialized
from lockgen.core import activation as rules
from lockgen.core.lock_builder import LockgenMeta
from lockgen.core.node_match import TargetFit, choose, fit, node_summary
from lockgen.core.stack_layout import lock_path, target_of_lock
from lockgen.model.names import shown
from lockgen.errors import UserError
from lockgen.model.node import NodeFacts
from lockgen.model.spec import StackSpec

if TYPE_CHECKING:
    from lockgen.api.steps.shared_steps import Meter


@dataclass(frozen=True)
class Detection:
    """The target a node matches in a stack, and how every target fits."""

    stack: Path
    node: NodeFacts
    chosen: TargetFit
    fits: tuple[TargetFit, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"stack": str(self.stack), "target": self.chosen.target, "reasons": list(self.chosen.reasons), "node": self.node.model_dump(mode="json"), "targets": [f.as_dict() for f in self.fits]}


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
    from lockgen.adapters.node_facts import node_facts
    from lockgen.adapters.stack_file import read_stack

    path = _stack_path(stack)
    return _detect(path, read_stack(path).spec, node_facts(node_file))


def _detect(path: Path, spec: StackSpec, node: NodeFacts) -> Detection:
    has_gpu = any(t.is_gpu for t in spec.targets)
    fits = tuple(fit(t, spec.platforms_of(t), node, has_gpu) for t in spec.targets)
    return Detection(path, node, choose(list(fits), node, str(path)), fits)


@dataclass(frozen=True)
class Wanted:
    """Which environment a command asks for: a lock or stack (`source`), the stack's `target`, the lock's
    `platform`, and where it is or goes (`prefix`; alone: an existing environment)."""

    source: Path | None = None
    target: str | None = None
    platform: str | None = None
    prefix: Path | None = None


def activation(wanted: Wanted, progress: Callable[[str], None], meter: Meter | None = None) -> Activation:
    """The environment `wanted` names (a lock, or a stack whose `target` or detected target's lock is used),
    materialized if it is not yet; with no source, the existing environment at `prefix`."""
    lock: Path | None = None
    if wanted.source is None and wanted.prefix is not None:
        if wanted.target is not None or wanted.platform is not None:
            raise UserError("--target and --platform choose a lock's environment, and none is given", "pass the LOCK or STACK too, or drop them to use the environment at --prefix as it is")
        where, name = wanted.prefix.absolute(), wanted.prefix.absolute().name
    else:
        lock = _lock_of(wanted.source, wanted.target, progress)
        loaded = read_lock(lock)
        where, _ = materialized(loaded, wanted.platform, wanted.prefix, progress, meter)
        name = LockgenMeta(loaded.lock).target or target_of_lock(lock)
    kind = env_process.environment_kind(where)
    if kind is None:
        raise UserError(f"{where} is not an environment (no conda-meta/, no pyvenv.cfg)", "pass the prefix of a conda environment or venv, or a LOCK to materialize")
    calling = env_process.calling_environment()
    environment = rules.activated(kind, PurePosixPath(where), name, calling)
    if kind == "conda" and env_process.activate_scripts(where):
        after, said = env_process.sourced_environment(where, environment)
        for line in said.splitlines():
            progress(line)
        environment = rules.sourced(environment, after)
    return Activation(where, kind, rules.prompt_name(name), lock, environment, rules.changes(calling, environment))


def run(wanted: Wanted, command: Sequence[str], progress: Callable[[str], None], meter: Meter | None = None) -> NoReturn:
    """Replaces lockgen with `command` in the environment (its exit status and signals are the command's)."""
    env_process.exec_command(list(command), activation(wanted, progress, meter).environment)


def shell(wanted: Wanted, progress: Callable[[str], None], meter: Meter | None = None) -> NoReturn:
    """Replaces lockgen with `$SHELL` (else bash) in the environment, its prompt marked `(lockgen:NAME)`."""
    program = env_process.login_shell() or find_tool("bash", "install bash, or set SHELL to your shell")
    kind = rules.shell_kind(program)
    active = activation(wanted, progress, meter)
    environment = dict(active.environment)
    if kind is not None:  # the activation again after the user's rc files (lockgen/data/shell/)
        environment["LOCKGEN_ACTIVATE"] = rules.exports(active.changes, kind)
    env_process.exec_shell(program, kind, environment, f"lockgen:{active.name}")


def exports(wanted: Wanted, shell_name: str | None, progress: Callable[[str], None], meter: Meter | None = None) -> str:
    """The activation as lines for `eval` in `shell_name` (default: `$SHELL`'s kind, else bash)."""
    kind = rules.shell_kind(shell_name) if shell_name else rules.shell_kind(env_process.login_shell() or "") or "bash"
    if kind is None:
        raise UserError(f"lockgen writes activations for bash, zsh and fish, not `{shown(shell_name or '', 40)}`", "pass --shell bash, zsh or fish")
    return rules.exports(activation(wanted, progress, meter).changes, kind)


def _stack_path(stack: Path | None) -> Path:
    path = stack or Path("stack.toml")
    return path / "stack.toml" if path.is_dir() else path


def _is_stack(source: Path) -> bool:
    return source.suffix == ".toml" or source.is_dir()


def _lock_of(source: Path | None, target: str | None, progress: Callable[[str], None]) -> Path:
    """The lock `source` names: a lock itself, or a stack's lock for `target` (detected when not given)."""
    if source is None and not Path("stack.toml").is_file():
        raise UserError("no LOCK or STACK given, and no stack.toml in this folder", "lockgen run LOCK -- CMD, or lockgen run STACK -- CMD (--prefix DIR: an existing environment)")
    if source is not None and not _is_stack(source):
        if target is not None:
            raise UserError(f"--target chooses a stack's lock, and {source} is a lock", "drop --target, or pass the stack")
        return source
    from lockgen.adapters.node_facts import node_facts  # a stack's: a lock given needs neither
    from lockgen.adapters.stack_file import read_stack

    path = _stack_path(source)
    spec = read_stack(path).spec
    if target is None:
        found = _detect(path, spec, node_facts())
        target = found.chosen.target
        progress(f"this node ({node_summary(found.node)}) is target {target}: {', '.join(found.chosen.reasons)}")
    elif target not in {t.name for t in spec.targets}:
        raise UserError(f"no target `{target}` in {path}", f"its targets: {', '.join(t.name for t in spec.targets)}")
    lock = lock_path(path.parent, target)
    if not lock.is_file():
        raise UserError(f"target `{target}` of {path} has no lock yet ({lock})", f"lockgen resolve {path}")
    return lock
