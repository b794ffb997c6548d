"""Several GPUs: run under `torchrun` (one process per GPU; gloo on CPUs), lockgen launches it.

All-reduce correctness, bus bandwidth at several sizes (nccl-tests' formula: algbw * 2(n-1)/n),
small-message latency (8 B to 256 KiB, the median of several timed batches: what gradient sync of
small buckets waits for), a DDP training step, and parameters identical on every rank afterwards. Every check is
collective,
so each node's first process (local rank 0) writes the same checks into its own node's JSON.

    torchrun --nproc_per_node 2 -m verify.dist --out dist.json
    torchrun --nnodes 2 --nproc_per_node 8 --rdzv_backend c10d --rdzv_endpoint HOST:29400 --rdzv_id JOB \
        -m verify.dist --out dist.json                                         (on each node)
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist

from verify import SCHEMA
from verify.nvml import Nvml, Telemetry
from verify.results import Results
from verify.schema import Figure, allreduce_busbw, allreduce_latency
from verify.train import SMALL, Gpt, batch_of


def _bus_bandwidth(results: Results, device: torch.device, world: int, sizes_mib: list[int], iterations: int) -> None:
    for size in sizes_mib:
        tensor = torch.ones(size * 2**20 // 4, dtype=torch.float32, device=device)
        for _ in range(3):
            dist.all_reduce(tensor)
        _sync(device)
        dist.barrier()
        started = time.perf_counter()
        for _ in range(iterations):
            dist.all_reduce(tensor)
        _sync(device)
        seconds = (time.perf_counter() - started) / iterations
        algbw = tensor.numel() * 4 / seconds / 1e9
        busbw = algbw * 2 * (world - 1) / world
        figure = Figure(busbw, "GB/s bus", algbw=round(algbw, 2), time_us=round(seconds * 1e6, 1))
        results.figure(allreduce_busbw(size), figure)


LATENCY_SIZES = (8, 64, 512, 4096, 32768, 262144)  # bytes


def _latency(results: Results, device: torch.device, batches: int = 7, per_batch: int = 20) -> None:
    """Median microseconds per all-reduce at each small size: batches of back-to-back calls, each batch timed."""
    for size in LATENCY_SIZES:
        tensor = torch.ones(max(size // 4, 2), dtype=torch.float32, device=device)
        for _ in range(5):
            dist.all_reduce(tensor)
        _sync(device)
        dist.barrier()
        times = []
        for _ in range(batches):
            started = time.perf_counter()
            for _ in range(per_batch):
                dist.all_reduce(tensor)
            _sync(device)
            times.append((time.perf_counter() - started) / per_batch)
        batches_us = tuple(round(t * 1e6, 1) for t in times)
        results.figure(allreduce_latency(size), Figure(statistics.median(times) * 1e6, "us", batches_us=batches_us))


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _ddp_step(results: Results, device: torch.device, rank: int) -> None:
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(0)
    model = Gpt(SMALL).to(device)
    ddp = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = torch.optim.AdamW(ddp.parameters(), lr=1e-3)
    generator = torch.Generator(device="cpu").manual_seed(100 + rank)  # each rank sees other data
    losses = []
    for _ in range(3):
        inputs, targets = batch_of(SMALL, device, generator)
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(ddp(inputs).view(-1, SMALL.vocab), targets.reshape(-1))
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    named = list(model.named_parameters())
    flat = torch.cat([p.detach().flatten() for _, p in named])
    high, low = flat.clone(), flat.clone()
    dist.all_reduce(high, op=dist.ReduceOp.MAX)
    dist.all_reduce(low, op=dist.ReduceOp.MIN)
    identical = bool(torch.equal(high, low))
    results.check(
        "distributed",
        "ddp_parameters_identical",
        identical,
        f"{flat.numel()} parameters {'identical' if identical else 'DIFFER'} on every rank after 3 DDP steps"
        + ("" if identical else f" ({_where_they_differ(named, high - low)})"),
    )
    results.check(
        "distributed",
        "ddp_loss_finite",
        all(x == x and abs(x) != float("inf") for x in losses),
        f"rank {rank} losses {', '.join(f'{x:.3f}' for x in losses)}",
    )


def _where_they_differ(named: Sequence[tuple[str, torch.Tensor]], spread: torch.Tensor) -> str:
    """Which parameter tensors differ between ranks and by how much (the spread is max - min over ranks)."""
    differing, offset = [], 0
    for name, parameter in named:
        part = spread[offset : offset + parameter.numel()]
        offset += parameter.numel()
        if bool(part.any()):
            differing.append((name, int((part != 0).sum()), float(part.abs().max())))
    first = ", ".join(f"{name}: {count} values, up to {largest:.3g}" for name, count, largest in differing[:3])
    return f"{len(differing)} of {len(named)} tensors: {first}"


def _inject_fault(rank: int) -> None:
    """Fault injection for testing the launcher's failure handling: VERIFY_FAULT_HANG_RANK=N makes rank N
    hang before its first collective, VERIFY_FAULT_EXIT_RANK=N makes it die."""
    if os.environ.get("VERIFY_FAULT_HANG_RANK") == str(rank):
        time.sleep(10**6)
    if os.environ.get("VERIFY_FAULT_EXIT_RANK") == str(rank):
        os._exit(17)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m verify.dist")
    parser.add_argument("--out", required=True, help="where each node's local rank 0 writes the JSON document")
    parser.add_argument("--sizes-mib", default="1,16,128,1024", help="all-reduce sizes in MiB")
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--timeout-s", type=float, default=120)
    parser.add_argument("--joined", help="a file each node's local rank 0 makes once every rank has met")
    args = parser.parse_args(argv)
    use_cuda = torch.cuda.is_available()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if use_cuda:
        torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    bound: dict[str, Any] = {"device_id": device} if use_cuda else {}  # a keyword older torch lacks: CUDA only
    dist.init_process_group("nccl" if use_cuda else "gloo", timeout=dt.timedelta(seconds=args.timeout_s), **bound)
    rank, world = dist.get_rank(), dist.get_world_size()
    if local_rank == 0 and args.joined:
        open(args.joined, "w").close()
    node_size = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    results = Results()
    if local_rank == 0:
        results.log = lambda line: print(line, file=sys.stderr, flush=True)
    nvml = Nvml()
    started = time.perf_counter()
    _inject_fault(rank)
    with Telemetry(nvml, list(range(nvml.device_count() or 0)) if local_rank == 0 and use_cuda else []) as telemetry:
        value = torch.full((4096,), float(rank + 1), device=device)
        dist.all_reduce(value)
        expected = world * (world + 1) / 2
        results.check(
            "distributed",
            "allreduce_sum",
            bool(torch.all(value == expected)),
            f"sum over {world} ranks: {value[0].item():g} (expected {expected:g})",
        )
        results.guarded(
            "distributed",
            "allreduce_bandwidth",
            lambda: _bus_bandwidth(
                results, device, world, [int(s) for s in args.sizes_mib.split(",")], args.iterations
            ),
        )
        results.guarded("distributed", "allreduce_latency", lambda: _latency(results, device))
        results.guarded("distributed", "ddp_step", lambda: _ddp_step(results, device, rank))
        dist.barrier()
    if local_rank == 0:
        document = {
            "schema": SCHEMA,
            "kind": "distributed",
            "world_size": world,
            "backend": dist.get_backend(),
            "nodes": world // node_size,
            "node_rank": int(os.environ.get("GROUP_RANK", "0")),
            "checks": results.checks_json(),
            "figures": results.figures_json(),
            "telemetry": telemetry.summary(),
            "duration_s": round(time.perf_counter() - started, 2),
        }
        with open(args.out, "w", encoding="utf-8") as stream:
            json.dump(document, stream, indent=2, sort_keys=True)
    dist.barrier()  # every rank leaves together: one that tears down first resets its peers' connections (gloo aborts)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    code = main()
    # The document is written: leave without the interpreter's teardown, where torch's C++ threads and
    # static destructors race (`terminate called without an active exception`, about 1 run in 25 under load
    # with gloo), which would turn a finished run into a dead rank.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
