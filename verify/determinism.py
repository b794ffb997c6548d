"""The deterministic work, in the kernel's own process: the numerics fingerprint (`verify.numerics`, every run)
and, in full runs, the determinism check: two seeded runs of the small GPT with deterministic algorithms must
give bit-identical losses.

Deterministic cuBLAS needs `CUBLAS_WORKSPACE_CONFIG=:4096:8` before cuBLAS starts: `python -m verify` sets it
(`pin_workspace`) before it imports torch. On Hopper and later (compute capability 9 to 12) that is torch's
default workspace anyway (32 MiB, `4096*8*1024` in torch's CublasHandlePool), so every figure runs as a job
would; on older GPUs it is 32 MiB instead of torch's 8 MiB, more than the 4 MiB cuBLAS asks for there.
Measured on an H100 (2026-12-06, torch 2.11.0+cu130): GEMM figures and the GPT steps with and without the
variable agreed (bf16 800/800 TFLOP/s, fp32 step 137.9/137.2 ms), and the fingerprint computed here, after
other work, gave the seven digests its own child process had given (issue 48's evidence). A child process
cost a second torch import and CUDA start (2-5 s of waiting on the lent H100s) for nothing.

Everything the process may have changed is pinned for the deterministic work and restored after
(`pinned`): deterministic algorithms on, cuDNN's autotuner off, TF32 off for matrix products (torch's
defaults otherwise), and on CPUs one thread: two seeded CPU runs gave losses apart by rounding (1e-6 from the
second step) on a loaded 2-core host, as the CPU DDP check saw in the tied embedding's gradient, since some CPU
kernels sum per-thread parts in the order threads finish, which deterministic algorithms do not cover.
"""

from __future__ import annotations

import contextlib
import os
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported after `pin_workspace` ran
    import torch

    from verify.results import Results
    from verify.schema import KernelNumerics

WORKSPACE_VARIABLE, WORKSPACE = "CUBLAS_WORKSPACE_CONFIG", ":4096:8"


def pin_workspace() -> str | None:
    """Sets cuBLAS's deterministic workspace for this process (before torch starts cuBLAS); returns the value
    the environment gave (None: unset), which the document records as the environment's."""
    given = os.environ.get(WORKSPACE_VARIABLE)
    os.environ[WORKSPACE_VARIABLE] = WORKSPACE
    return given


@contextlib.contextmanager
def pinned(device: torch.device) -> Iterator[None]:
    """Deterministic algorithms, cuDNN's autotuner off, TF32 off for products, one CPU thread on CPUs; the
    process's own settings restored after."""
    import torch

    backends = torch.backends
    saved = (
        # torch.use_deterministic_algorithms(True) would also import torch._inductor
        torch.are_deterministic_algorithms_enabled(),
        # (to set its config): 3.4 s on the lent H100, 5.8 s on a CPU host, for no compiled code; its switch alone is
        # set
        backends.cudnn.benchmark,
        backends.cudnn.deterministic,
        backends.cuda.matmul.allow_tf32,
        backends.cudnn.allow_tf32,
        torch.get_num_threads(),
    )
    torch._C._set_deterministic_algorithms(True)
    backends.cudnn.benchmark, backends.cudnn.deterministic = False, True
    backends.cuda.matmul.allow_tf32, backends.cudnn.allow_tf32 = False, True
    if device.type != "cuda":
        torch.set_num_threads(1)
    try:
        yield
    finally:
        torch._C._set_deterministic_algorithms(saved[0])
        backends.cudnn.benchmark, backends.cudnn.deterministic = saved[1], saved[2]
        backends.cuda.matmul.allow_tf32, backends.cudnn.allow_tf32 = saved[3], saved[4]
        torch.set_num_threads(saved[5])


@dataclass(frozen=True)
class DeterministicWork:
    """The fingerprint, or its error's last line when it raised (a failed check, not a lost determinism check),
    and the two seeded runs' losses when they ran."""

    fingerprint: KernelNumerics | None
    error: str | None
    losses: list[list[float]] | None


def deterministic_work(device: torch.device, losses: bool) -> DeterministicWork:
    """The deterministic work under pinned settings: the fingerprint and, with `losses`, two seeded runs."""
    from verify.numerics import fingerprint
    from verify.train import SMALL, run_steps

    found, error = None, None
    with pinned(device):
        try:
            found = fingerprint(device)
        except Exception as exc:
            error = traceback.format_exception_only(type(exc), exc)[-1].strip()[:400]
        runs = [run_steps(SMALL, device, "fp32", 6, seed=3, warmup=0)["losses"] for _ in range(2)] if losses else None
    return DeterministicWork(found, error, runs)


def judge(results: Results, device: torch.device, losses: bool) -> None:
    """Runs the deterministic work; records the fingerprint (`results.numerics`) and the determinism check."""
    done = deterministic_work(device, losses)
    _fingerprint(results, done)
    if done.losses is None:
        return
    first, second = done.losses
    where = "" if device.type == "cuda" else " (on one CPU thread)"
    results.check(
        "training",
        "deterministic",
        first == second,
        f"two seeded runs gave identical losses{where}"
        if first == second
        else f"losses differ{where}: {first} vs {second}",
    )


def _fingerprint(results: Results, done: DeterministicWork) -> None:
    found = done.fingerprint
    if found is None:
        results.check("numerics", "fingerprint", False, f"the deterministic work raised {done.error}")
        return
    results.numerics = found
    names = ", ".join(name.removeprefix("gemm_") for name in found.digests)
    results.check(
        "numerics",
        "fingerprint",
        True,
        f"{len(found.digests)} digests of deterministic work ({names}) in {found.seconds:.1f} s",
    )
