"""NVML through ctypes: driver version and per-GPU telemetry, with no Python binding installed.

`Telemetry` samples utilisation, power, temperature, clocks and what holds the clocks down (power
cap, thermal slowdown...) on a thread while the checks run, so that a throttling GPU explains a low
figure. Everything degrades to None without a driver.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time

from verify.schema import GpuDuring, Spread, as_json

_NVML_SUCCESS = 0
_TEMPERATURE_GPU = 0
_CLOCK_SM, _CLOCK_MEM = 1, 2
# nvmlClocksEventReasons bits (nvml.h); "gpu idle" (0x1) is left out: it is not a limit on a busy GPU
CLOCK_LIMIT_REASONS = {
    0x2: "applications clocks setting",
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x10: "sync boost",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake",
    0x100: "display clocks setting",
}


def clock_limit_names(mask: int) -> list[str]:
    """The named reasons set in an NVML clocks-event bitmask, idle excluded."""
    return [name for bit, name in CLOCK_LIMIT_REASONS.items() if mask & bit]


class _Utilization(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


class Nvml:
    """A loaded, initialised libnvidia-ml, or `available = False`."""

    def __init__(self) -> None:
        self.available = False
        self.error = ""
        try:
            self.lib = ctypes.CDLL("libnvidia-ml.so.1")
            if self.lib.nvmlInit_v2() != _NVML_SUCCESS:
                self.error = "nvmlInit failed"
                return
            self.available = True
        except OSError as exc:
            self.error = f"libnvidia-ml.so.1 not loadable: {exc}"

    def driver_version(self) -> str | None:
        if not self.available:
            return None
        buffer = ctypes.create_string_buffer(96)
        if self.lib.nvmlSystemGetDriverVersion(buffer, 96) != _NVML_SUCCESS:
            return None
        return buffer.value.decode()

    def device_count(self) -> int | None:
        if not self.available:
            return None
        count = ctypes.c_uint()
        return count.value if self.lib.nvmlDeviceGetCount_v2(ctypes.byref(count)) == _NVML_SUCCESS else None

    def _handle(self, index: int) -> ctypes.c_void_p | None:
        handle = ctypes.c_void_p()
        if self.lib.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(handle)) != _NVML_SUCCESS:
            return None
        return handle

    def device_name(self, index: int) -> str | None:
        handle = self._handle(index) if self.available else None
        if handle is None:
            return None
        buffer = ctypes.create_string_buffer(96)
        return buffer.value.decode() if self.lib.nvmlDeviceGetName(handle, buffer, 96) == _NVML_SUCCESS else None

    def sample(self, index: int) -> dict[str, float | None]:
        """One reading of one GPU: utilisation %, power W, temperature C, SM and memory clocks MHz, clock limits."""
        handle = self._handle(index) if self.available else None
        reading: dict[str, float | None] = {
            "util": None,
            "power_w": None,
            "temp_c": None,
            "sm_mhz": None,
            "mem_mhz": None,
        }
        if handle is None:
            return reading
        util = _Utilization()
        if self.lib.nvmlDeviceGetUtilizationRates(handle, ctypes.byref(util)) == _NVML_SUCCESS:
            reading["util"] = float(util.gpu)
        milliwatts = ctypes.c_uint()
        if self.lib.nvmlDeviceGetPowerUsage(handle, ctypes.byref(milliwatts)) == _NVML_SUCCESS:
            reading["power_w"] = milliwatts.value / 1000.0
        temp = ctypes.c_uint()
        if self.lib.nvmlDeviceGetTemperature(handle, _TEMPERATURE_GPU, ctypes.byref(temp)) == _NVML_SUCCESS:
            reading["temp_c"] = float(temp.value)
        for key, clock in (("sm_mhz", _CLOCK_SM), ("mem_mhz", _CLOCK_MEM)):
            mhz = ctypes.c_uint()
            if self.lib.nvmlDeviceGetClockInfo(handle, clock, ctypes.byref(mhz)) == _NVML_SUCCESS:
                reading[key] = float(mhz.value)
        reading["clock_limits"] = self._clock_limits(handle)
        return reading

    def _clock_limits(self, handle: ctypes.c_void_p) -> float | None:
        """The clocks-event bitmask (named ClocksThrottleReasons before NVML 12.5), or None."""
        mask = ctypes.c_ulonglong()
        for name in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
            function = getattr(self.lib, name, None)
            if function is not None and function(handle, ctypes.byref(mask)) == _NVML_SUCCESS:
                return float(mask.value)
        return None


def nvml_index(cuda_index: int) -> int:
    """NVML numbers every GPU of the host; CUDA only those CUDA_VISIBLE_DEVICES lists (by index here;
    UUIDs are taken as the identity order)."""
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if cuda_index < len(visible) and visible[cuda_index].isdigit():
        return int(visible[cuda_index])
    return cuda_index


class Telemetry:
    """Samples every GPU on a background thread; `summary()` gives min/max/mean per quantity and GPU."""

    def __init__(self, nvml: Nvml, devices: list[int], interval_s: float = 0.1) -> None:
        self.nvml, self.devices, self.interval = nvml, devices, interval_s
        self.samples: dict[int, list[dict[str, float | None]]] = {d: [] for d in devices}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "Telemetry":
        if self.nvml.available and self.devices:
            self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2)

    def _run(self) -> None:
        while not self._stop.is_set():
            for device in self.devices:
                self.samples[device].append({**self.nvml.sample(device), "t": time.monotonic()})
            time.sleep(self.interval)

    def during(self, device: int, start: float, end: float) -> GpuDuring | None:
        """The statistics of one GPU's samples between two `time.monotonic()` readings (one phase), None when
        none of them read anything."""
        stats = _statistics([s for s in self.samples.get(device, []) if s["t"] is not None and start <= s["t"] <= end])
        return stats if stats != GpuDuring() else None

    def summary(self) -> dict[str, object]:
        return {
            "available": self.nvml.available,
            "error": self.nvml.error,
            "interval_s": self.interval,
            "samples": sum(len(s) for s in self.samples.values()),
            "gpus": {str(device): as_json(_statistics(samples)) for device, samples in self.samples.items()},
        }


def _statistics(samples: list[dict[str, float | None]]) -> GpuDuring:
    """min/max/mean per quantity, and the clock limits seen (by name)."""

    def spread(key: str) -> Spread | None:
        values = [v for v in (s.get(key) for s in samples) if v is not None]
        return Spread(min(values), max(values), round(sum(values) / len(values), 1)) if values else None

    masks = {int(v) for v in (s.get("clock_limits") for s in samples) if v is not None}
    limits = tuple(sorted({name for mask in masks for name in clock_limit_names(mask)}))
    return GpuDuring(
        util=spread("util"),
        power_w=spread("power_w"),
        temp_c=spread("temp_c"),
        sm_mhz=spread("sm_mhz"),
        mem_mhz=spread("mem_mhz"),
        clock_limits_seen=limits or None,
    )
