"""What the kernel process ran with: the environment variables that change how CUDA, cuDNN, cuBLAS, NCCL,
PyTorch or OpenMP behave, and the shared libraries the process actually loaded (`/proc/self/maps`).

Variables are recorded by prefix (and a named list); the settings known to slow or serialise work are
named with what they do, so a failed floor can name the one that explains it. Libraries are judged by
where they came from: the CUDA stack's own libraries (cudart, cuBLAS, cuDNN, NCCL, torch's) must come from
the environment under test; the driver's (libcuda, libnvidia-*) may be anywhere the loader found them;
anything else must be the environment's or the system's (the loader's default folders). Any other library
is foreign: preloaded (`LD_PRELOAD`, `/etc/ld.so.preload`) or shadowed (`LD_LIBRARY_PATH`) from outside the
lock.
"""

from __future__ import annotations

import os
import re
import site
import sys

PREFIXES = (
    "CUDA_",
    "CUDNN_",
    "CUBLAS",
    "CUBLASLT_",
    "NCCL_",
    "TORCH_",
    "PYTORCH_",
    "OMP_",
    "KMP_",
    "MKL_",
    "NVIDIA_",
    "NVSHMEM_",
    "TORCHINDUCTOR_",
    "TRITON_",
)
NAMED = ("LD_PRELOAD", "LD_LIBRARY_PATH", "PYTHONPATH", "CUBLAS_WORKSPACE_CONFIG")
# settings that change speed or results for every job on the node: (name, harmful value or None for "set"), what it does
SLOWING = {
    ("CUDA_LAUNCH_BLOCKING", "1"): "makes every kernel launch wait for the GPU (serialised launches)",
    ("NVIDIA_TF32_OVERRIDE", "0"): "turns TF32 off: FP32 matrix work runs at FP32 speed",
    ("CUDA_DEVICE_MAX_CONNECTIONS", "1"): "gives the GPU one hardware queue: kernels of different streams serialise",
    ("PYTORCH_NO_CUDA_MEMORY_CACHING", "1"): "turns PyTorch's caching allocator off: every tensor is a cudaMalloc",
    ("TORCH_CUDNN_V8_API_DISABLED", "1"): "uses cuDNN's legacy API, without its newer kernels",
    ("CUDNN_LOGINFO_DBG", "1"): "logs every cuDNN call",
    ("CUBLAS_LOGINFO_DBG", "1"): "logs every cuBLAS call",
    ("NCCL_P2P_DISABLE", "1"): "turns GPU peer-to-peer transfers off for NCCL",
    ("NCCL_SHM_DISABLE", "1"): "turns shared-memory transport off for NCCL",
    ("LD_PRELOAD", None): "loads a library into every process before the stack's own",
}
_STACK_LIBRARY = re.compile(
    r"lib(cudart|cublas|cublasLt|cudnn[a-z_]*|nccl|nvrtc|nvJitLink|cufft|curand|cusparse|"
    r"cusolver|cupti|nvToolsExt|torch[a-z_]*|c10[a-z_]*|shm|nvshmem[a-z_]*)\b"
)
_DRIVER_LIBRARY = re.compile(r"lib(cuda|nvidia-[a-z0-9_-]+|nvcuvid|nvoptix)\.so")
SYSTEM_FOLDERS = ("/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/", "/usr/local/lib/")


def behaviour_variables(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The variables set that change the stack's behaviour, by prefix and by name."""
    environ = dict(os.environ) if environ is None else environ
    return {name: value for name, value in sorted(environ.items()) if name.startswith(PREFIXES) or name in NAMED}


def unkept_bytecode(module: object) -> str | None:
    """Why `module` (torch) was imported from its sources with none of its byte code kept, so that every run
    compiles them again (on a lent H100 whose environment set PYTHONDONTWRITEBYTECODE=1, torch's import took
    3.2-3.8 s, and 1.3-1.7 s with its byte code kept); None where its byte code is kept (or was just written)."""
    cached = getattr(getattr(module, "__spec__", None), "cached", None)
    if not isinstance(cached, str) or os.path.exists(cached):
        return None
    unkept = "compiled from its sources, no byte code kept"
    if sys.dont_write_bytecode:
        return f"{unkept}: PYTHONDONTWRITEBYTECODE is set (or python -B); unset it, or set PYTHONPYCACHEPREFIX=DIR"
    return f"{unkept}: {os.path.dirname(cached)} is not writable; keep it elsewhere: PYTHONPYCACHEPREFIX=DIR"


def slowing_settings(variables: dict[str, str]) -> list[str]:
    """`NAME=VALUE (what it does)` for each set variable known to slow or serialise the node's work."""
    found = []
    for (name, harmful), effect in SLOWING.items():
        value = variables.get(name)
        if value is not None and value.strip() and (harmful is None or value.strip() == harmful):
            found.append(f"{name}={value} ({effect})")
    return found


def loaded_libraries(maps: str | None = None) -> list[str]:
    """Every shared library file mapped into this process, as the kernel mapped it (paths, sorted)."""
    if maps is None:
        try:
            with open("/proc/self/maps", encoding="utf-8", errors="replace") as stream:
                maps = stream.read()
        except OSError:
            return []
    paths = set()
    for line in maps.splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/") and ".so" in parts[5].rsplit("/", 1)[-1]:
            paths.add(parts[5].removesuffix(" (deleted)"))
    return sorted(paths)


def _inside(path: str, folder: str) -> bool:
    return bool(folder) and os.path.realpath(path).startswith(os.path.realpath(folder).rstrip("/") + "/")


def _site_folders() -> list[str]:
    """The site-packages this interpreter imports from: a venv's own, and its base's when the venv includes
    the system site-packages (the environment as it runs)."""
    try:
        return list(site.getsitepackages())
    except AttributeError:  # an interpreter started without the site module's full API
        return []


def foreign_libraries(
    libraries: list[str], environment: str | None = None, base: str | None = None, site_folders: list[str] | None = None
) -> list[str]:
    """The loaded libraries that are neither the environment's (its prefix, or the site-packages it imports
    from), nor its base interpreter's, nor the driver's, nor, for libraries other than the CUDA stack's, the
    system's."""
    environment = environment or sys.prefix
    base = base or sys.base_prefix
    folders = [environment, *(_site_folders() if site_folders is None else site_folders)]
    foreign = []
    for path in libraries:
        name = path.rsplit("/", 1)[-1]
        if any(_inside(path, folder) for folder in folders):
            continue
        if _DRIVER_LIBRARY.match(name):
            continue
        if _STACK_LIBRARY.match(name):
            foreign.append(path)  # the stack's own library, from outside the environment: shadowed
            continue
        if _inside(path, base) or os.path.realpath(path).startswith(SYSTEM_FOLDERS):
            continue
        foreign.append(path)
    return foreign
