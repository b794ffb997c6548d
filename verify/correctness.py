"""Numerical correctness: GEMM per dtype against fp64, cuDNN convolution against the CPU, and SDPA backends
against the math backend."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from verify.results import Results
from verify.schema import Figure, FigureRef

# relative Frobenius error allowed against an fp64 reference, per dtype (K = 1024-4096 accumulations)
GEMM_TOLERANCE = {"fp32": 1e-5, "tf32": 5e-3, "bf16": 2e-2, "fp16": 5e-3, "fp8": 1.2e-1}


def _relative_error(result: torch.Tensor, reference: torch.Tensor) -> float:
    difference = (result.double() - reference).norm()
    return float(difference / reference.norm())


def gemm(results: Results, device: torch.device, has_fp8: bool, size: int) -> None:
    """Each dtype's matrix product against an fp64 reference computed on the same inputs."""
    generator = torch.Generator(device="cpu").manual_seed(1234)
    a = torch.randn(size, size, generator=generator, dtype=torch.float32)
    b = torch.randn(size, size, generator=generator, dtype=torch.float32)
    dtypes = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16}
    if device.type == "cuda":
        dtypes["fp16"] = torch.float16
    for name, dtype in dtypes.items():
        a_d, b_d = a.to(device=device, dtype=dtype), b.to(device=device, dtype=dtype)
        reference = a_d.double().cpu() @ b_d.double().cpu()
        previous = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
        try:
            error = _relative_error((a_d @ b_d).cpu(), reference)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = previous
        limit = GEMM_TOLERANCE[name]
        results.check(
            "correctness", f"gemm_{name}", error <= limit, f"relative error {error:.2e} (limit {limit:.0e})", error
        )
    if has_fp8:
        scale = torch.tensor(1.0, device=device)
        a8 = a.to(device).to(torch.float8_e4m3fn)
        b8 = b.to(device).to(torch.float8_e4m3fn).t().contiguous().t()
        reference = a8.double().cpu() @ b8.double().cpu()
        out = torch._scaled_mm(a8, b8, scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16)
        error = _relative_error(out.cpu(), reference)
        results.check(
            "correctness",
            "gemm_fp8",
            error <= GEMM_TOLERANCE["fp8"],
            f"relative error {error:.2e} (limit {GEMM_TOLERANCE['fp8']:.0e}, e4m3 in, bf16 out)",
            error,
        )


def convolution(results: Results, device: torch.device) -> None:
    """A conv2d forward and backward on the device (cuDNN on GPUs) against the CPU in fp64."""
    generator = torch.Generator(device="cpu").manual_seed(7)
    x = torch.randn(8, 32, 56, 56, generator=generator)
    w = torch.randn(64, 32, 3, 3, generator=generator) / 17
    previous = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    try:
        xr, wr = x.double().requires_grad_(), w.double().requires_grad_()
        xd, wd = x.to(device, copy=True).requires_grad_(), w.to(device, copy=True).requires_grad_()
        out = F.conv2d(xd, wd, padding=1)
        out.square().mean().backward()
        ref = F.conv2d(xr, wr, padding=1)
        ref.square().mean().backward()
    finally:
        torch.backends.cudnn.allow_tf32 = previous
    for name, got, want in (("forward", out, ref), ("grad_input", xd.grad, xr.grad), ("grad_weight", wd.grad, wr.grad)):
        assert got is not None and want is not None  # backward() above gave every leaf its grad
        error = _relative_error(got.detach().cpu(), want.detach())
        results.check("correctness", f"conv_{name}", error <= 1e-4, f"relative error {error:.2e} (limit 1e-04)", error)


def attention(results: Results, device: torch.device) -> None:
    """Scaled-dot-product attention through each backend this build offers, against the math backend."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    generator = torch.Generator(device="cpu").manual_seed(11)
    q, k, v = (torch.randn(4, 8, 256, 64, generator=generator).to(device=device, dtype=dtype) for _ in range(3))
    with sdpa_kernel([SDPBackend.MATH]):
        reference = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True)
    backends = {"math": SDPBackend.MATH}
    if device.type == "cuda":
        backends.update({"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION})
        if hasattr(SDPBackend, "CUDNN_ATTENTION"):
            backends["cudnn"] = SDPBackend.CUDNN_ATTENTION
    limit = 2e-2 if dtype == torch.bfloat16 else 1e-5
    ran = []
    for name, backend in backends.items():
        try:
            with sdpa_kernel([backend]):
                out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        except RuntimeError as exc:
            reason = str(exc).splitlines()[0][:200]
            results.figure(FigureRef("attention", name), Figure(None, "available", reason=reason))
            continue
        ran.append(name)
        error = _relative_error(out.float().cpu(), reference.double().cpu())
        results.check(
            "correctness", f"sdpa_{name}", error <= limit, f"relative error {error:.2e} (limit {limit:.0e})", error
        )
    if device.type == "cuda":
        results.check(
            "correctness",
            "sdpa_fused_backend",
            any(n in ran for n in ("flash", "efficient", "cudnn")),
            f"fused backends that ran: {', '.join(n for n in ran if n != 'math') or 'none'}",
        )
