"""Use case `lockgen explain STACK --target T`: every torch/pytorch candidate the target was judged against
(the releases each torch source serves, PyPI's own index included, read through `torch_source_steps` as resolve
reads them, with the releases newer than the facts its evidence admits; and the pytorch/libtorch builds of the
stack's conda channels), each with its verdict and the rule that decided it, newest first, and the CUDA window
they were judged in (a stack whose Python comes from its conda channels is judged for any Python, and without
newer releases, whose requirements depend on it). A CPU target's PyPI candidates are decided by the target alone
(`cpu-target`); what the CPU index serves is read as resolve's uv reads it, and admitted (`cpu-index`) but for
what its page or the stack's pin keeps out, so explain names the torch resolve takes, and an unreadable CPU index
is an error in both. The conda channels' builds are judged by the arch rules and then by resolve's own conda solve
of the target (its plan, `plan.plan_request`, and the same solver): an admitted build the solve did not take is
named so (`solve`), so the newest admitted build is the one resolve locks."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lockgen.api.steps.stack_steps import load_stack
from lockgen.api.steps.torch_source_steps import TorchSources
from lockgen.core.gpu.arch_rules import ARCH_SPECIFIC_PACKAGES, cuda_window, judge_build
from lockgen.core.credentials import scrub_url
from lockgen.core.gpu.explain import Candidate, cpu_target_candidates, newest_first
from lockgen.core.gpu.facts import load_facts
from lockgen.core.gpu.facts_inference import with_inferred
from lockgen.core.stack.plan import plan_request
from lockgen.core.pypi.torch_choice import cpu_index_candidates, source_candidates
from lockgen.errors import UserError
from lockgen.model.names import normalize

# the conda rules' verdict kinds under the names the PyPI rules use, so one rule reads the same from any source
_RULE_OF_KIND = {
    "newer-cuda": "driver-floor",
    "native": "native-kernels",
    "ptx": "ptx-only",
    "unknown-arch-list": "arch-list-unknown",
    "not-pinned": "pin",
    "cuda-build": "cpu-target",
}


def explain(stack_path: Path, target_name: str | None, aliases: Sequence[str] = ()) -> dict[str, Any]:
    """The candidates of one target (None: the one this node matches, as `lockgen detect` chooses it) and their
    verdicts (a CUDA window a driver cannot reach is the error)."""
    stack, channels = load_stack(stack_path, aliases)
    spec = stack.spec
    if target_name is None:
        from lockgen.adapters.node.node_facts import node_facts
        from lockgen.core.fleet.node_match import matched_target

        target_name = matched_target(spec, node_facts(None), str(stack_path)).target
    target = next((t for t in spec.targets if t.name == target_name), None)
    if target is None:
        raise UserError(
            f"no target `{target_name}` in {stack_path}",
            f"its targets: {', '.join(t.name for t in spec.targets) or 'none'}",
        )
    facts = load_facts()
    window = cuda_window(facts, target) if target.is_gpu else None
    found: list[Candidate] = []
    if any(normalize(d.name) == "torch" for d in spec.pypi_dependencies):
        sources = TorchSources(facts, spec)
        if not target.is_gpu:
            found += cpu_target_candidates(facts, spec, target)
            for platform in spec.platforms_of(target):
                found += cpu_index_candidates(spec, target, platform, sources.cpu_offer(target, platform, spec.python))
        for platform in spec.platforms_of(target) if target.is_gpu else ():
            inference = sources.inference(target, platform, spec.python_minor) if spec.python_minor else None
            judged = with_inferred(facts, inference) if inference else facts
            found += source_candidates(
                judged, spec, target, window, platform, sources.offers(target, platform, spec.python_minor)
            )
    if channels is not None:
        for platform in spec.platforms_of(target):
            builds = channels.candidates(platform, ARCH_SPECIFIC_PACKAGES)
            request = plan_request(
                facts, spec, target, platform, window, builds
            )  # resolve's plan: its errors are resolve's
            solved = {
                (p.name, p.version, p.build)
                for p in channels.solve_all([(request, None)])[0]
                if p.name in ARCH_SPECIFIC_PACKAGES
            }
            taken = {name: version for name, version, _ in solved}
            for build in builds:
                verdict = judge_build(facts, target, window, platform, build, spec.unknown_releases)
                rule = (
                    "ptx-jit"
                    if verdict.kind == "ptx" and verdict.allowed
                    else _RULE_OF_KIND.get(verdict.kind, verdict.kind)
                )
                allowed, reason = verdict.allowed, verdict.reason.split(": ", 1)[-1]
                if allowed and build.name in taken and (build.name, build.version, build.build) not in solved:
                    allowed, rule = False, "solve"
                    reason = (
                        f"admitted by the arch rules ({reason}), but the conda solve took {build.name} "
                        f"{taken[build.name]}: this build's Python or dependencies do not fit the stack's"
                    )
                found.append(
                    Candidate(
                        build.name,
                        build.version,
                        build.build,
                        scrub_url(build.channel.rsplit("/", 2)[0]),
                        platform,
                        allowed,
                        rule,
                        reason,
                    )
                )
    candidates = newest_first(found)
    admitted = [c for c in candidates if c.admitted]
    return {
        "target": target.name,
        "arch": target.arch,
        "driver": target.driver,
        "cuda_window": f"{window.low}..{window.high}" if window else None,
        "window_reason": window.reason if window else None,
        "newest_admitted": {
            p: next((f"{c.package} {c.release} ({c.variant}, {c.source})" for c in admitted if c.platform == p), None)
            for p in spec.platforms_of(target)
        },
        "candidates": [c.as_dict() for c in candidates],
    }
