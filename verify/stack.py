"""What stack this interpreter really runs: versions, devices, driver, and kernel coverage of the arch."""

from __future__ import annotations

import os
import platform
import sys

import torch

from verify.nvml import Nvml


def arch_cc(arch: str) -> tuple[int, int] | None:
    """`sm90` -> (9, 0); `sm100` -> (10, 0); `sm121` -> (12, 1); `cpu` -> None."""
    if arch == "cpu":
        return None
    digits = arch.removeprefix("sm")
    return int(digits[:-1]), int(digits[-1])


def coverage(arch_list: list[str], cc: tuple[int, int]) -> str:
    """`sass` when the build has a cubin that runs on `cc`, `ptx` when only PTX JIT reaches it, else `none`."""
    ptx = False
    for entry in arch_list:
        kind, _, number = entry.partition("_")
        digits = number.rstrip("af")
        if not digits.isdigit():
            continue
        major, minor = int(digits[:-1]), int(digits[-1])
        if kind == "sm" and major == cc[0] and minor <= cc[1] and not number.endswith("a"):
            return "sass"
        if kind == "sm" and number.endswith("a") and (major, minor) == cc:
            return "sass"
        if kind == "compute" and (major, minor) <= cc:
            ptx = True
    return "ptx" if ptx else "none"


def describe(arch: str, nvml: Nvml) -> dict[str, object]:
    """Versions, devices and driver as this interpreter sees them."""
    cuda_ok = torch.cuda.is_available()
    devices = []
    if cuda_ok:
        for index in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(index)
            devices.append(
                {
                    "index": index,
                    "name": props.name,
                    "compute_capability": f"{props.major}.{props.minor}",
                    "memory_gib": round(props.total_memory / 2**30, 1),
                    "sms": props.multi_processor_count,
                }
            )
    arch_list = torch.cuda.get_arch_list() if cuda_ok else []
    cc = arch_cc(arch)
    nccl = None
    if cuda_ok and hasattr(torch.cuda, "nccl"):
        try:
            version = torch.cuda.nccl.version()
            nccl = ".".join(str(v) for v in version) if isinstance(version, tuple) else str(version)
        except Exception:  # NCCL missing from the build
            nccl = None
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {
        "python": platform.python_version(),
        "executable": sys.executable,
        "platform": f"{platform.system().lower()}-{platform.machine()}",
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": cudnn_text(cudnn),
        "nccl": nccl,
        "cuda_available": cuda_ok,
        "arch_list": arch_list,
        "arch_coverage": coverage(arch_list, cc) if cc else "n/a",
        "devices": devices,
        "driver": nvml.driver_version() or _driver_from_torch(),
        "driver_source": "nvml" if nvml.available else "torch",
        "host_gpu_count": nvml.device_count(),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "tf32_override": os.environ.get("NVIDIA_TF32_OVERRIDE"),
        "nccl_env": {name: value for name, value in sorted(os.environ.items()) if name.startswith("NCCL_")},
        "cpu_threads": torch.get_num_threads(),
    }


def cudnn_text(version: int | None) -> str | None:
    """cuDNN's version number as text: 91900 -> `9.19.0`, 8902 -> `8.9.2`."""
    if version is None:
        return None
    if version >= 90000:  # cuDNN 9 encodes major*10000 + minor*100 + patch
        return f"{version // 10000}.{version % 10000 // 100}.{version % 100}"
    return f"{version // 1000}.{version % 1000 // 100}.{version % 100}"


def _driver_from_torch() -> str | None:
    try:
        # CUDA builds only, absent from torch's stubs; the CUDA driver API version, e.g. 13000
        return str(torch._C._cuda_getDriverVersion())  # type: ignore[attr-defined]
    except Exception:
        return None


def seconds_since_start() -> float | None:
    """How long this process has run (interpreter start, imports and all), from /proc on Linux; None elsewhere."""
    try:
        with open("/proc/self/stat", encoding="ascii") as stream:
            started_ticks = int(stream.read().rpartition(")")[2].split()[19])  # field 22: starttime
        with open("/proc/uptime", encoding="ascii") as stream:
            uptime = float(stream.read().split()[0])
        return max(uptime - started_ticks / os.sysconf("SC_CLK_TCK"), 0.0)
    except (OSError, ValueError, IndexError):
        return None
