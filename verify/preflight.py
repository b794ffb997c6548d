"""Pre-flight: the node's state before the first kernel, and what the process runs with, as checks whose
failure names its cause in one line (DCGM level 1's deployment checks, for what decides whether this stack
will train here).

Checks (category `node`, then `process`): no other process on the GPU (another job's kernels take the SMs
and its memory is not ours: every floor after would fail for it); free memory at least the envelope's share
of the GPU's; no pending row remap, remap failure, pending page retirement or volatile uncorrectable ECC
error; the PCIe link at its maximum width (the link generation drops at rest by design, so it is a figure);
no setting known to slow or serialise work (`process_env.SLOWING`); no shared library from outside the
environment (judged after the checks ran, when every library the run needed is loaded). The readings go
into the document's `stack` (`node`, `settings`, `libraries`) for the host to attribute failed floors.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from verify import node_health, process_env
from verify.nvml import Nvml, nvml_index
from verify.results import Results
from verify.schema import Figure, node

FREE_MEMORY_FRACTION = 0.9  # of the GPU's memory, unless lockgen's envelope says otherwise (`expected`)


class EarlyReading:
    """The node's readings of CUDA device 0, taken on a thread while this process imports torch (NVML's calls
    and the window at rest release the GIL, and none of this process's kernels runs yet): 0.5 s of the
    stack phase on the lent H100s, 0.3 s of it the window at rest."""

    def __init__(self) -> None:
        self.reading: dict[str, Any] | None = None
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            self.reading = node_health.health(Nvml(), nvml_index(0))
        except Exception:  # read again, in the stack phase, where a failure is a failed check
            self.reading = None

    def result(self) -> dict[str, Any] | None:
        self.thread.join()
        return self.reading


def node_checks(
    results: Results, nvml: Nvml, own_pids: set[int], expected: dict[str, Any], early: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The node checks of CUDA device 0 (the one the kernel uses), from `early` readings (`EarlyReading`)
    where there are some; returns its readings."""
    index = nvml_index(0)
    reading: dict[str, Any] = (
        early if early is not None else node_health.health(nvml, index)
    )  # its values: each reading's own kind
    if not reading.get("available"):
        results.check(
            "node", "readings", True, f"NVML is not available here ({nvml.error or 'no GPU'}): node checks skipped"
        )
        return reading
    others = [p for p in reading.get("processes") or [] if int(p["pid"]) not in own_pids]
    reading["other_processes"] = others
    _other_processes(results, reading, others)
    _free_memory(results, reading, others, float(expected.get("free_memory_fraction") or FREE_MEMORY_FRACTION))
    _memory_errors(results, reading)
    _pcie(results, reading)
    for name, unit in (
        ("util_at_rest", "%"),
        ("persistence_mode", "bool"),
        ("pcie_gen", ""),
        ("pcie_gen_max", ""),
        ("ecc_corrected_volatile", "errors"),
        ("ecc_uncorrected_aggregate", "errors"),
        ("remapped_rows_corrected", "rows"),
        ("remapped_rows_uncorrected", "rows"),
    ):
        value = reading.get(name)
        results.figure(node(name), Figure(None if value is None else float(value), unit))
    return reading


def _describe(process: dict[str, Any]) -> str:
    memory = process.get("memory_mib")
    held = f", {memory / 1024:.1f} GiB" if isinstance(memory, (int, float)) else ""
    return f"pid {process['pid']} ({process['name']}{held})"


def _other_processes(results: Results, reading: dict[str, Any], others: list[dict[str, Any]]) -> None:
    util = reading.get("util_at_rest")
    busy = f"; the GPU was {util:.0f}% busy at rest" if isinstance(util, (int, float)) else ""
    results.figure(node("other_processes"), Figure(float(len(others)), "processes"))
    results.check(
        "node",
        "no_other_process",
        not others,
        ("no other process on the GPU" + busy)
        if not others
        else f"{len(others)} other processes on the GPU: {', '.join(_describe(p) for p in others[:5])}{busy}",
    )


def _free_memory(results: Results, reading: dict[str, Any], others: list[dict[str, Any]], fraction: float) -> None:
    memory = reading.get("memory")
    if not memory:
        return
    results.figure(node("memory_free_gib"), Figure(memory["free_gib"], "GiB", total_gib=memory["total_gib"]))
    needed = fraction * memory["total_gib"]
    holders = f"; held by {', '.join(_describe(p) for p in others[:5])}" if others else ""
    results.check(
        "node",
        "free_memory",
        memory["free_gib"] >= needed,
        f"{memory['free_gib']:.1f} of {memory['total_gib']:.1f} GiB free (floor {fraction:.0%}: a training job "
        f"needs the GPU's memory){holders}",
        memory["free_gib"],
    )


def _memory_errors(results: Results, reading: dict[str, Any]) -> None:
    problems = []
    if reading.get("remap_pending"):
        problems.append("a row remap is pending (reset the GPU)")
    if reading.get("remap_failed"):
        problems.append("a row remap failed (the GPU needs service)")
    if reading.get("retired_pages_pending"):
        problems.append("a page retirement is pending (reset the GPU)")
    uncorrected = reading.get("ecc_uncorrected_volatile")
    if uncorrected:
        problems.append(f"{uncorrected} uncorrectable ECC errors since the driver loaded")
    if reading.get("ecc_enabled") is None and reading.get("remap_pending") is None:
        results.check("node", "memory_health", True, "ECC and row remapping are not reported by this GPU")
        return
    results.check(
        "node",
        "memory_health",
        not problems,
        "; ".join(problems)
        if problems
        else f"ECC {'on' if reading.get('ecc_enabled') else 'off'}, no pending remap or retirement, "
        f"{reading.get('remapped_rows_uncorrected') or 0} rows remapped for uncorrectable errors",
    )


def _pcie(results: Results, reading: dict[str, Any]) -> None:
    width, widest = reading.get("pcie_width"), reading.get("pcie_width_max")
    if not width or not widest:
        return
    results.check(
        "node",
        "pcie_link",
        width >= widest,
        f"PCIe x{width} of x{widest} (gen {reading.get('pcie_gen')} of {reading.get('pcie_gen_max')} at rest, "
        "where links slow down by design)",
        float(width),
    )


def settings_check(results: Results, environ: dict[str, str] | None = None) -> dict[str, str]:
    """The behaviour-changing variables of the environment (this process's, unless `environ` is given), one
    check that none of them slows the node's work."""
    variables = process_env.behaviour_variables(environ)
    slowing = process_env.slowing_settings(variables)
    results.check(
        "process",
        "settings",
        not slowing,
        "; ".join(slowing)
        if slowing
        else f"{len(variables)} CUDA/PyTorch/NCCL/OpenMP variables set, none known to slow or serialise work",
    )
    return variables


def libraries_check(results: Results) -> dict[str, Any]:
    """Every shared library this process loaded is the environment's, the driver's or the system's."""
    loaded = process_env.loaded_libraries()
    foreign = process_env.foreign_libraries(loaded)
    results.check(
        "process",
        "libraries",
        not foreign,
        f"{len(foreign)} of {len(loaded)} loaded libraries come from outside the environment: {', '.join(foreign[:4])}"
        if foreign
        else f"all {len(loaded)} loaded libraries are the environment's, the driver's or the system's",
    )
    return {"loaded": len(loaded), "foreign": foreign, "preload_file": os.path.exists("/etc/ld.so.preload")}
