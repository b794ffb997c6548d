"""Which target of a stack a node matches, pure: the rules `lockgen detect` (and `run`/`shell`/`activate`
given a stack and no `--target`) apply to a node's facts.

A target fits a node when every one of these holds, and each is said (what matched, or what differs):
- platform: the node's is one the target is locked for;
- glibc: the node's is at least the target's (a lock for glibc 2.28 runs on 2.36, not on 2.17);
- a GPU target: every GPU of the node is of the target's arch (`sm90` is compute capability 9.0; kernels
  built for one arch are not the next one's), and the node's driver is at least the target's (a driver
  runs the CUDA of every older one);
- a `cpu` target: the node has no GPU, or the stack has no GPU target at all. A GPU node of a stack with GPU
  targets never falls back to its CPU target silently (CPU-only installs on GPU nodes are the failure
  lockgen exists to prevent): `--target` chooses it.

Of the targets that fit, the closest wins: a GPU target before a CPU one, then the newest driver, then the
newest glibc; two that tie on all of these are an error naming both (`--target` decides)."""

from __future__ import annotations

from dataclasses import dataclass

from lockgen.core.gpu.versions import as_tuple
from lockgen.errors import TargetError
from lockgen.model.node import NodeFacts
from lockgen.model.spec import StackSpec, Target


@dataclass(frozen=True)
class TargetFit:
    """One target against the node: whether it fits, and why (what matched, or what differs)."""

    target: str
    fits: bool
    reasons: tuple[str, ...]
    rank: tuple[bool, tuple[int, ...], tuple[int, ...]]

    def as_dict(self) -> dict[str, object]:
        return {"target": self.target, "matches": self.fits, "reasons": list(self.reasons)}


def node_summary(node: NodeFacts) -> str:
    """The node in a few words: `linux-64, glibc 2.36, 8 x sm90 (driver 580.95.05)`."""
    archs = sorted({gpu.arch for gpu in node.gpus})
    gpus = f"{len(node.gpus)} x {'/'.join(archs)} (driver {node.driver})" if node.gpus else "no GPU"
    return f"{node.platform}, glibc {node.glibc or 'unknown'}, {gpus}"


def fit(target: Target, platforms: tuple[str, ...], node: NodeFacts, stack_has_gpu: bool) -> TargetFit:
    """How `target` (locked for `platforms`) fits `node`."""
    matched: list[str] = []
    differs: list[str] = []
    if node.platform in platforms:
        matched.append(f"platform {node.platform}")
    else:
        differs.append(f"platform: the node is {node.platform}, the target {', '.join(platforms)}")
    if node.glibc is not None and as_tuple(node.glibc) >= as_tuple(target.glibc):
        matched.append(f"glibc {node.glibc} >= {target.glibc}")
    else:
        differs.append(f"glibc: the node has {node.glibc or 'none known'}, the target needs >= {target.glibc}")
    if target.is_gpu:
        _gpu_fit(target, node, matched, differs)
    elif not node.gpus:
        matched.append("cpu target, and the node has no GPU")
    elif not stack_has_gpu:
        matched.append(f"cpu target (the stack has no GPU target; unused: {_gpus(node)})")
    else:
        differs.append(
            f"cpu target, and the node has {_gpus(node)} the stack has GPU targets for (--target chooses it)"
        )
    rank = (target.is_gpu, as_tuple(target.driver or "0"), as_tuple(target.glibc))
    return TargetFit(target.name, not differs, tuple(differs or matched), rank)


def _gpus(node: NodeFacts) -> str:
    return f"{len(node.gpus)} GPU" + "s" * (len(node.gpus) != 1)


def _gpu_fit(target: Target, node: NodeFacts, matched: list[str], differs: list[str]) -> None:
    archs = sorted({gpu.arch for gpu in node.gpus})
    if not node.gpus:
        differs.append(f"arch: the node has no GPU, the target is {target.arch}")
    elif archs == [target.arch]:
        capability = node.gpus[0].compute_capability
        matched.append(f"arch {target.arch} (compute capability {capability}, {_gpus(node)})")
    else:
        differs.append(f"arch: the node's GPUs are {'/'.join(archs)}, the target is {target.arch}")
    if node.driver is not None and target.driver is not None and as_tuple(node.driver) >= as_tuple(target.driver):
        matched.append(f"driver {node.driver} >= {target.driver}")
    elif node.gpus:
        differs.append(f"driver: the node has {node.driver}, the target needs >= {target.driver}")


def choose(fits: list[TargetFit], node: NodeFacts, source: str) -> TargetFit:
    """The closest fitting target; none, or two that tie, is an error naming every target (and what
    differs for each) or the tied ones."""
    fitting = sorted((f for f in fits if f.fits), key=lambda f: f.rank, reverse=True)
    if not fitting:
        every = "; ".join(f"{f.target}: {', '.join(f.reasons)}" for f in fits) or "it has none"
        raise TargetError(
            f"no target of {source} matches this node ({node_summary(node)}): {every}",
            "add a target for this node to the stack, or pass --target NAME to choose one",
        )
    tied = [f.target for f in fitting if f.rank == fitting[0].rank]
    if len(tied) > 1:
        raise TargetError(
            f"targets {', '.join(tied)} of {source} match this node equally ({node_summary(node)})",
            f"pass --target {tied[0]} (or another of them)",
        )
    return fitting[0]


def matched_target(spec: StackSpec, node: NodeFacts, source: str) -> TargetFit:
    """The target of `spec` this node matches, as `lockgen detect` chooses it (`fit` for each, then `choose`)."""
    has_gpu = any(t.is_gpu for t in spec.targets)
    return choose([fit(t, spec.platforms_of(t), node, has_gpu) for t in spec.targets], node, source)
