"""What NVML says of a GPU's health and who else uses it, read before the first kernel (DCGM's level-1
"deployment" reads): the compute and graphics processes on the GPU (pid, name, memory), memory total, free
and used, utilisation over a short window at rest, persistence mode, ECC mode and its volatile and
aggregate error counts, remapped rows (pending remaps, remap failures) and retired pages pending, PCIe link
generation and width against the GPU's maximum, and the clock limits at rest. Every reading degrades to
None where NVML (or this GPU) does not have it; XID events need an NVML event set held across the run and
are not read.
"""

from __future__ import annotations

import ctypes
import time

from verify.nvml import Nvml, clock_limit_names

_SUCCESS, _INSUFFICIENT_SIZE = 0, 7
_NOT_AVAILABLE = (1 << 64) - 1  # NVML_VALUE_NOT_AVAILABLE: a process's memory where the driver hides it
_CORRECTED, _UNCORRECTED = 0, 1
_VOLATILE, _AGGREGATE = 0, 1
REST_WINDOW_S = 0.3  # utilisation readings at rest: NVML's rate covers its last sample period (1/6 s to 1 s)


class _ProcessInfo(ctypes.Structure):
    _fields_ = [
        ("pid", ctypes.c_uint),
        ("used_memory", ctypes.c_ulonglong),
        ("gpu_instance", ctypes.c_uint),
        ("compute_instance", ctypes.c_uint),
    ]


class _Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


def _uint(lib: ctypes.CDLL, name: str, handle: ctypes.c_void_p) -> int | None:
    function = getattr(lib, name, None)
    value = ctypes.c_uint()
    if function is None or function(handle, ctypes.byref(value)) != _SUCCESS:
        return None
    return value.value


def _process_name(lib: ctypes.CDLL, pid: int) -> str:
    buffer = ctypes.create_string_buffer(256)
    if lib.nvmlSystemGetProcessName(ctypes.c_uint(pid), buffer, 256) == _SUCCESS and buffer.value:
        return buffer.value.decode(errors="replace").rsplit("/", 1)[-1]
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8") as stream:
            return stream.read().strip()
    except OSError:
        return "?"  # another PID namespace (a container beside this one)


def processes(nvml: Nvml, index: int) -> list[dict[str, object]] | None:
    """Every compute and graphics process on GPU `index`: pid, name, MiB of its memory (None where hidden)."""
    handle = nvml._handle(index) if nvml.available else None
    if handle is None:
        return None
    found: dict[int, dict[str, object]] = {}
    for kind, names in (
        ("compute", ("nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2")),
        ("graphics", ("nvmlDeviceGetGraphicsRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses_v2")),
    ):
        function = next((getattr(nvml.lib, n) for n in names if hasattr(nvml.lib, n)), None)
        if function is None:
            return None
        count = ctypes.c_uint(0)
        status = function(handle, ctypes.byref(count), None)
        if status not in (_SUCCESS, _INSUFFICIENT_SIZE):
            return None
        infos = (_ProcessInfo * (count.value + 8))()
        count = ctypes.c_uint(len(infos))
        if function(handle, ctypes.byref(count), infos) != _SUCCESS:
            return None
        for info in infos[: count.value]:
            memory = None if info.used_memory == _NOT_AVAILABLE else round(info.used_memory / 2**20)
            found.setdefault(
                info.pid,
                {"pid": info.pid, "name": _process_name(nvml.lib, info.pid), "memory_mib": memory, "kind": kind},
            )
    return [found[pid] for pid in sorted(found)]


def memory(nvml: Nvml, index: int) -> dict[str, float] | None:
    handle = nvml._handle(index) if nvml.available else None
    reading = _Memory()
    if handle is None or nvml.lib.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(reading)) != _SUCCESS:
        return None
    return {
        "total_gib": round(reading.total / 2**30, 2),
        "free_gib": round(reading.free / 2**30, 2),
        "used_gib": round(reading.used / 2**30, 2),
    }


def _ecc(nvml: Nvml, handle: ctypes.c_void_p) -> dict[str, object]:
    current, pending = ctypes.c_uint(), ctypes.c_uint()
    if nvml.lib.nvmlDeviceGetEccMode(handle, ctypes.byref(current), ctypes.byref(pending)) != _SUCCESS:
        return {"ecc_enabled": None}
    counts: dict[str, object] = {"ecc_enabled": bool(current.value)}
    for label, error in (("corrected", _CORRECTED), ("uncorrected", _UNCORRECTED)):
        for scope, counter in (("volatile", _VOLATILE), ("aggregate", _AGGREGATE)):
            value = ctypes.c_ulonglong()
            ok = nvml.lib.nvmlDeviceGetTotalEccErrors(handle, error, counter, ctypes.byref(value)) == _SUCCESS
            counts[f"ecc_{label}_{scope}"] = value.value if ok else None
    return counts


def _remapping(nvml: Nvml, handle: ctypes.c_void_p) -> dict[str, object]:
    function = getattr(nvml.lib, "nvmlDeviceGetRemappedRows", None)
    values = [ctypes.c_uint() for _ in range(4)]
    if function is None or function(handle, *(ctypes.byref(v) for v in values)) != _SUCCESS:
        remapped: dict[str, object] = {
            "remapped_rows_corrected": None,
            "remapped_rows_uncorrected": None,
            "remap_pending": None,
            "remap_failed": None,
        }
    else:
        corrected, uncorrected, pending, failed = (v.value for v in values)
        remapped = {
            "remapped_rows_corrected": corrected,
            "remapped_rows_uncorrected": uncorrected,
            "remap_pending": bool(pending),
            "remap_failed": bool(failed),
        }
    retired = _uint(nvml.lib, "nvmlDeviceGetRetiredPagesPendingStatus", handle)
    remapped["retired_pages_pending"] = None if retired is None else bool(retired)
    return remapped


def _pcie(nvml: Nvml, handle: ctypes.c_void_p) -> dict[str, object]:
    return {
        key: _uint(nvml.lib, name, handle)
        for key, name in (
            ("pcie_gen", "nvmlDeviceGetCurrPcieLinkGeneration"),
            ("pcie_gen_max", "nvmlDeviceGetMaxPcieLinkGeneration"),
            ("pcie_width", "nvmlDeviceGetCurrPcieLinkWidth"),
            ("pcie_width_max", "nvmlDeviceGetMaxPcieLinkWidth"),
        )
    }


def at_rest(nvml: Nvml, index: int) -> dict[str, object]:
    """Utilisation over `REST_WINDOW_S` (max of the readings) and the clock limits seen meanwhile."""
    readings = []
    deadline = time.monotonic() + REST_WINDOW_S
    while True:
        readings.append(nvml.sample(index))
        if time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    utils = [v for v in (r.get("util") for r in readings) if v is not None]
    masks = {int(v) for v in (r.get("clock_limits") for r in readings) if v is not None}
    return {
        "util_at_rest": max(utils) if utils else None,
        "clock_limits_at_rest": sorted({n for m in masks for n in clock_limit_names(m)}),
    }


def health(nvml: Nvml, index: int) -> dict[str, object]:
    """Every reading above of GPU `index` (NVML's numbering), None where unavailable."""
    handle = nvml._handle(index) if nvml.available else None
    if handle is None:
        return {"available": False}
    reading: dict[str, object] = {"available": True, "processes": processes(nvml, index), "memory": memory(nvml, index)}
    persistence = _uint(nvml.lib, "nvmlDeviceGetPersistenceMode", handle)
    reading["persistence_mode"] = None if persistence is None else bool(persistence)
    reading.update(_ecc(nvml, handle))
    reading.update(_remapping(nvml, handle))
    reading.update(_pcie(nvml, handle))
    reading.update(at_rest(nvml, index))
    return reading
