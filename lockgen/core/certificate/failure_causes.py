"""The most likely cause of a failed floor, from the kernel's evidence, in order (issue 30's rule): another
process on the GPU (its kernels take the SMs, so every floor after fails for it); a setting known to slow
or serialise work; a shared library from outside the environment; the GPU's clocks held down, with the
reason NVML gave; else nothing is named and the stack itself is the suspect. Pure: it reads the `stack`
section the kernel wrote (`node`, `slowing_settings`, `libraries`) and the clock limits of the telemetry."""

from __future__ import annotations

from typing import Any

BUSY_AT_REST = 20.0  # % utilisation before the first kernel: another user, even one NVML does not list


def _process(process: dict[str, Any]) -> str:
    memory = process.get("memory_mib")
    held = f", {memory / 1024:.1f} GiB" if isinstance(memory, (int, float)) else ""
    return f"pid {process.get('pid')} ({process.get('name')}{held})"


def likely_cause(stack: dict[str, Any], clock_limits: tuple[str, ...]) -> str:
    """One clause naming the likely cause ("; …"), or "" when the evidence names none."""
    node = stack.get("node") or {}
    others = node.get("other_processes") or []
    if others:
        listed = ", ".join(_process(p) for p in others[:3])
        return f"; another process was on the GPU when the run started: {listed} (its work shares the GPU)"
    util = node.get("util_at_rest")
    if isinstance(util, (int, float)) and util >= BUSY_AT_REST:
        return (
            f"; the GPU was {util:.0f}% busy before the first kernel although no process of this host is listed "
            "(another container's job?)"
        )
    settings = stack.get("slowing_settings") or []
    if settings:
        return f"; set in the environment: {'; '.join(settings[:3])}"
    foreign = (stack.get("libraries") or {}).get("foreign") or []
    if foreign:
        return f"; libraries from outside the environment were loaded: {', '.join(foreign[:3])}"
    if clock_limits:
        return f"; the GPU's clocks were held down during the run by: {', '.join(clock_limits)}"
    return ""
