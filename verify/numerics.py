"""The numerics fingerprint: SHA-256 digests of the exact bits that deterministic work leaves, computed in the
kernel's process with deterministic settings pinned (`verify.determinism`: deterministic algorithms,
`CUBLAS_WORKSPACE_CONFIG=:4096:8`).

The work is the same in quick and full runs, from fixed seeds: a matrix product per precision the device has
(fp32, TF32, bf16, fp16, and fp8 e4m3 from compute capability 8.9), a bf16 convolution forward and backward,
and a few AdamW steps of a small GPT under bf16 autocast (the parameters and losses after them). Nodes with
the same GPU model, driver, environment and library versions must give the same digests: a node whose bits
differ runs another setting (NVIDIA_TF32_OVERRIDE=0 changes the TF32 product's bits), another library, or
hardware that computes wrong without an error (silent data corruption). lockgen compares them across nodes;
the kernel only computes them. On CPUs the sizes are smaller and the work runs on one thread.
"""

from __future__ import annotations

import ctypes
import hashlib
import re
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from verify.schema import KernelNumerics
from verify.stack import cudnn_text
from verify.train import GptConfig, seeded_run, train_step

WORK = "lockgen.numerics/1"  # names the work below: digests of other work never compare


@dataclass(frozen=True)
class Sizes:
    gemm: int
    conv_batch: int
    conv_channels: int
    conv_side: int
    model: GptConfig
    steps: int


GPU_SIZES = Sizes(
    gemm=4096,
    conv_batch=16,
    conv_channels=64,
    conv_side=56,
    model=GptConfig(vocab=1024, width=256, layers=2, heads=4, sequence=128, batch=8),
    steps=5,
)
CPU_SIZES = Sizes(
    gemm=256,
    conv_batch=2,
    conv_channels=8,
    conv_side=16,
    model=GptConfig(vocab=256, width=64, layers=2, heads=4, sequence=32, batch=4),
    steps=3,
)


def digest(*tensors: torch.Tensor) -> str:
    """The SHA-256 of the tensors' bytes, in order, as they lie in memory (contiguous, on the host)."""
    hashed = hashlib.sha256()
    for tensor in tensors:
        host = tensor.detach().contiguous().cpu()
        size = host.numel() * host.element_size()
        if size:
            hashed.update((ctypes.c_char * size).from_address(host.data_ptr()))
    return hashed.hexdigest()


def fingerprint(device: torch.device) -> KernelNumerics:
    """The digests of the deterministic work on `device`, what ran it, and the seconds it took."""
    started = time.perf_counter()
    sizes = GPU_SIZES if device.type == "cuda" else CPU_SIZES
    digests = _gemms(device, sizes.gemm)
    digests["conv_bf16"] = _convolution(device, sizes)
    digests["adamw_bf16"] = _training(device, sizes)
    return KernelNumerics(
        work=f"{WORK} {device.type} gemm {sizes.gemm}",
        device=_device_name(device),
        versions=_versions(device),
        digests=digests,
        seconds=round(time.perf_counter() - started, 3),
    )


def _gemms(device: torch.device, size: int) -> dict[str, str]:
    generator = torch.Generator(device=device).manual_seed(48)
    a = torch.randn(size, size, generator=generator, device=device)
    b = torch.randn(size, size, generator=generator, device=device)
    cuda = device.type == "cuda"
    products = (
        {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
        if cuda
        else {"fp32": torch.float32, "bf16": torch.bfloat16}
    )
    digests = {}
    previous = torch.backends.cuda.matmul.allow_tf32
    try:
        for name, dtype in products.items():
            torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
            digests[f"gemm_{name}"] = digest(a.to(dtype) @ b.to(dtype))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    if cuda and torch.cuda.get_device_capability(device) >= (8, 9):
        scale = torch.tensor(1.0, device=device)
        a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn).t().contiguous().t()
        digests["gemm_fp8"] = digest(torch._scaled_mm(a8, b8, scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16))
    return digests


def _convolution(device: torch.device, sizes: Sizes) -> str:
    """A bf16 3x3 convolution's output and both gradients (cuDNN's deterministic algorithms on GPUs)."""
    generator = torch.Generator(device=device).manual_seed(49)
    side, channels = sizes.conv_side, sizes.conv_channels
    x = (
        torch.randn(sizes.conv_batch, channels, side, side, generator=generator, device=device)
        .to(torch.bfloat16)
        .requires_grad_()
    )
    w = (
        (torch.randn(2 * channels, channels, 3, 3, generator=generator, device=device) / 24)
        .to(torch.bfloat16)
        .requires_grad_()
    )
    out = F.conv2d(x, w, padding=1)
    out.float().square().mean().backward()
    assert x.grad is not None and w.grad is not None  # backward() gave both leaves a gradient
    return digest(out, x.grad, w.grad)


def _training(device: torch.device, sizes: Sizes) -> str:
    """A few AdamW steps (`verify.adamw`, torch.optim.AdamW's update) of a small GPT under bf16 autocast: its
    parameters and losses after them."""
    model, optimizer, (inputs, targets) = seeded_run(sizes.model, device, seed=50, ops_optimizer=True)
    scaler = torch.amp.GradScaler(device.type, enabled=False)
    losses = [
        train_step(model, optimizer, scaler, inputs, targets, sizes.model, "bf16").detach() for _ in range(sizes.steps)
    ]
    return digest(torch.stack(losses), *model.parameters())


def _device_name(device: torch.device) -> str:
    """The GPU's name, or on CPUs the processor's model and the instruction set torch's kernels chose."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as stream:
            model = next((line.split(":", 1)[1].strip() for line in stream if line.startswith("model name")), "")
    except OSError:
        pass
    capability = torch.backends.cpu.get_cpu_capability() if hasattr(torch.backends, "cpu") else "unknown"
    return f"{model or 'cpu'} ({capability})"


def _versions(device: torch.device) -> dict[str, str | None]:
    cudnn = torch.backends.cudnn.version() if device.type == "cuda" and torch.backends.cudnn.is_available() else None
    return {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": cudnn_text(cudnn),
        "cublas": cublas_version() if device.type == "cuda" else None,
    }


def cublas_version() -> str | None:
    """The version of the libcublas this process loaded (`cublasGetProperty`), or None when none is loaded."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as stream:
            maps = stream.read()
    except OSError:
        return None
    found = re.search(r"(/\S*/libcublas\.so[.\d]*)$", maps, re.MULTILINE)
    if found is None:
        return None
    try:
        library = ctypes.CDLL(found.group(1))
        parts = []
        for part in range(3):  # MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
            value = ctypes.c_int()
            if library.cublasGetProperty(part, ctypes.byref(value)) != 0:
                return None
            parts.append(str(value.value))
        return ".".join(parts)
    except (OSError, AttributeError):
        return None
