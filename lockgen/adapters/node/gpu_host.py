"""The host's GPUs as `nvidia-smi` reports them (names, compute capability, driver, topology).

Used by `lockgen verify` before the kernel runs, to refuse early on the wrong hardware, and by `lockgen
detect` (`node_facts`) to say which of a stack's targets this node is; it never decides what a lock
contains (resolving never looks at the local GPU).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass


@dataclass(frozen=True)
class HostGpus:
    names: tuple[str, ...]
    compute_capabilities: tuple[str, ...]
    driver: str | None
    topology: str

    @property
    def count(self) -> int:
        return len(self.names)

    @property
    def interconnect(self) -> str:
        """`nvlink` when every GPU pair is joined by NVLink (`NV#` in `nvidia-smi topo -m`), else `pcie`."""
        if self.count < 2:
            return "none"
        rows = [line.split("\t") for line in self.topology.splitlines() if line.startswith("GPU")]
        cells = [cell.strip() for row in rows for cell in row[1 : self.count + 1] if cell.strip() != "X"]
        return "nvlink" if cells and all(cell.startswith("NV") for cell in cells) else "pcie"


def probe(topology: bool = True) -> HostGpus | None:
    """The host's GPUs, or None when there is no `nvidia-smi` or it finds no driver. `topology=False`: one call
    (names, compute capability, driver) and an empty topology, for detection, which never reads it."""
    if shutil.which("nvidia-smi") is None:
        return None
    from lockgen.adapters.tool_runner import run_tool  # subprocess: not loaded where there is no nvidia-smi (8 ms)

    query = run_tool(
        ["nvidia-smi", "--query-gpu=name,compute_cap,driver_version", "--format=csv,noheader"],
        "asking nvidia-smi for the GPUs",
        timeout_s=60,
        check=False,
    )
    if query.returncode != 0:
        return None
    rows = [[cell.strip() for cell in line.split(",")] for line in query.stdout.strip().splitlines() if line.strip()]
    clean = ""
    if topology:
        matrix = run_tool(["nvidia-smi", "topo", "-m"], "asking nvidia-smi for the topology", timeout_s=60, check=False)
        clean = _strip_ansi(matrix.stdout) if matrix.returncode == 0 else ""
    return HostGpus(
        names=tuple(r[0] for r in rows),
        compute_capabilities=tuple(r[1] for r in rows),
        driver=rows[0][2] if rows else None,
        topology=clean,
    )


def _strip_ansi(text: str) -> str:
    import re

    return re.sub(r"\x1b\[[0-9;]*m", "", text)
