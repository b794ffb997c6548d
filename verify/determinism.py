"""The deterministic child: the numerics fingerprint (`verify.numerics`, every run) and, in full runs, the
determinism check: two seeded runs of the small GPT with deterministic algorithms must give bit-identical losses.

Both run in a child interpreter: deterministic cuBLAS needs CUBLAS_WORKSPACE_CONFIG=:4096:8 before
CUDA starts, and set in the kernel's own process it shrinks cuBLAS's workspace for every figure
(measured on an H200: the bf16 GPT step went from 26 ms to 38-48 ms with it). The child is started
early and waits: its interpreter start, torch import and CUDA start (some 5 s on an H200 VM) overlap
the kernel's correctness checks; it is ready, idle, before any figure is timed, and runs its steps
when the kernel says go, after the last figure.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import time

from verify.results import Results

READY = "ready"


class DeterminismRun:
    """The child interpreter: `start` at once, `wait_ready` before timing anything, `judge` at the end."""

    def __init__(self, device_type: str, losses: bool = True, timeout_s: float = 300) -> None:
        self.timeout_s = timeout_s
        self.device_type = device_type
        self.losses = losses  # the determinism check's two runs too (the full run), not the fingerprint alone
        self.errors = tempfile.TemporaryFile(mode="w+")
        env = {**os.environ, "CUBLAS_WORKSPACE_CONFIG": ":4096:8"}
        command = [sys.executable, "-c", f"import verify.determinism as d; d.child({device_type!r}, {losses!r})"]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errors, text=True, env=env)
        self.failure: str | None = None

    @property
    def pid(self) -> int:
        """The child's process id (on the GPU beside this one: not another user of it)."""
        return self.process.pid

    def _line(self, deadline: float) -> str | None:
        """The child's next stdout line, or None when it ended or the deadline passed."""
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], max(deadline - time.monotonic(), 0))
        return self.process.stdout.readline().strip() if ready else None

    def _failed(self, what: str) -> str:
        self.errors.seek(0)
        lines = self.errors.read().strip().splitlines()
        code = self.process.poll()
        return f"child {what}: {lines[-1] if lines else f'exit {code}' if code is not None else 'no answer'}"

    def wait_ready(self) -> None:
        """Blocks until the child has started CUDA and waits (or has failed: judged later)."""
        if self._line(time.monotonic() + self.timeout_s) != READY:
            self.failure = self._failed("did not start")

    def judge(self, results: Results) -> None:
        """Lets the child run; records the fingerprint (`results.numerics`) and the determinism check."""
        if self.failure is None:
            assert self.process.stdin is not None
            try:
                self.process.stdin.write("go\n")
                self.process.stdin.flush()
            except BrokenPipeError:
                self.failure = self._failed("ended early")
        answer = self._line(time.monotonic() + self.timeout_s) if self.failure is None else None
        if self.failure is None and not answer:
            self.failure = self._failed("failed")
        if self.failure is not None:
            results.check("numerics", "fingerprint", False, self.failure)
            if self.losses:
                results.check("training", "deterministic", False, self.failure)
            return
        done = json.loads(answer or "{}")
        _fingerprint(results, done["fingerprint"])
        if not self.losses:
            return
        first, second = done["losses"]
        where = "" if self.device_type == "cuda" else " (on one CPU thread)"
        results.check("training", "deterministic", first == second, f"two seeded runs gave identical losses{where}" if first == second else f"losses differ{where}: {first} vs {second}")

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.errors.close()


def _fingerprint(results: Results, found: dict) -> None:
    if "error" in found:
        results.check("numerics", "fingerprint", False, f"the deterministic work raised {found['error']}")
        return
    results.numerics = found
    names = ", ".join(name.removeprefix("gemm_") for name in found["digests"])
    results.check("numerics", "fingerprint", True, f"{len(found['digests'])} digests of deterministic work ({names}) in {found['seconds']:.1f} s")


def child(device_type: str, losses: bool = True) -> None:
    """The child's side: start torch and CUDA, say ready, wait for go, compute the fingerprint and (with
    `losses`) run twice, print {fingerprint, losses}; a fingerprint that raised is its error's last line."""
    import traceback

    import torch

    from verify.numerics import fingerprint
    from verify.train import SMALL, run_steps

    device = torch.device(device_type, 0) if device_type == "cuda" else torch.device("cpu")
    if device_type != "cuda":
        # two seeded CPU runs gave losses apart by rounding (1e-6 from the second step) on a loaded 2-core host,
        # as the CPU DDP check saw in the tied embedding's gradient: some CPU kernels sum per-thread parts in
        # the order threads finish, which deterministic algorithms do not cover; the CPU stand-in runs one thread
        torch.set_num_threads(1)
    torch.zeros(1, device=device)  # CUDA's start, before the kernel times anything
    torch.use_deterministic_algorithms(True)
    print(READY, flush=True)
    if sys.stdin.readline().strip() != "go":
        return
    try:
        found = fingerprint(device)
    except Exception as exc:  # a fingerprint that cannot be computed is a failed check, not a lost determinism check
        found = {"error": traceback.format_exception_only(type(exc), exc)[-1].strip()[:400]}
    runs = [run_steps(SMALL, device, "fp32", 6, seed=3, warmup=0)["losses"] for _ in range(2)] if losses else None
    print(json.dumps({"fingerprint": found, "losses": runs}), flush=True)
