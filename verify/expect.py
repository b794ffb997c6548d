"""Stack checks (is this build able to use this GPU at all?) and the expectations lockgen passes from the lock."""

from __future__ import annotations

from typing import Any

from verify.results import Results
from verify.stack import arch_cc


def stack_checks(
    results: Results, arch: str, stack: dict[str, Any], allow_ptx: bool, expected_gpus: int | None
) -> bool:
    """For a GPU arch: a CUDA build, a visible GPU of that arch, native kernels, and every host GPU visible
    (unless lockgen says how many GPUs to expect). Returns whether GPU checks can run."""
    cc = arch_cc(arch)
    if cc is None:
        return results.check("stack", "cpu_build_runs", True, f"torch {stack['torch']} on {stack['platform']}")
    if not stack["cuda"]:
        return results.check(
            "stack",
            "cuda_build",
            False,
            f"torch {stack['torch']} is a CPU-only build (torch.version.cuda is None): install a CUDA build of torch",
        )
    results.check("stack", "cuda_build", True, f"torch {stack['torch']} built with CUDA {stack['cuda']}")
    if not stack["cuda_available"] or not stack["devices"]:
        visible = stack["cuda_visible_devices"]
        hint = f" (CUDA_VISIBLE_DEVICES={visible!r})" if visible is not None else ""
        return results.check("stack", "gpu_visible", False, f"torch sees no GPU{hint}; driver {stack['driver']}")
    wanted = f"{cc[0]}.{cc[1]}"
    found = sorted({d["compute_capability"] for d in stack["devices"]})
    results.check(
        "stack",
        "gpu_arch",
        found == [wanted],
        f"GPUs {', '.join(d['name'] for d in stack['devices'])} have compute capability {', '.join(found)}; "
        f"{arch} is {wanted}",
    )
    coverage = stack["arch_coverage"]
    native = coverage == "sass" or (coverage == "ptx" and allow_ptx)
    results.check(
        "stack",
        "native_kernels",
        native,
        f"torch arch list {' '.join(stack['arch_list'])}: {arch} covered by "
        f"{'native cubins' if coverage == 'sass' else 'PTX JIT only' if coverage == 'ptx' else 'nothing'}",
    )
    host = stack["host_gpu_count"]
    if host is not None and expected_gpus is None:
        visible = len(stack["devices"])
        hint = (
            f" (CUDA_VISIBLE_DEVICES={stack['cuda_visible_devices']!r})"
            if stack["cuda_visible_devices"] is not None
            else ""
        )
        results.check(
            "stack", "all_gpus_visible", visible == host, f"{visible} of the host's {host} GPUs visible{hint}"
        )
    return found == [wanted]


def _version_matches(expected: str, actual: str | None) -> bool:
    """`2.11.0` matches `2.11.0+cu130`; `9.10.2.21` (conda) matches `9.10.2` (torch reports three parts)."""
    if actual is None:
        return False
    actual_parts = actual.split("+")[0].split(".")
    expected_parts = expected.split("+")[0].split(".")
    width = min(len(actual_parts), len(expected_parts))
    return actual_parts[:width] == expected_parts[:width]


def _as_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".") if p.isdigit())


def expectations(results: Results, stack: dict[str, Any], expected: dict[str, Any]) -> None:
    """One pass/fail check per expectation lockgen took from the lock."""
    for key in ("torch", "cuda", "cudnn", "nccl"):
        if expected.get(key):
            actual = stack.get(key)
            results.check(
                "expect",
                f"{key}_version",
                _version_matches(str(expected[key]), actual),
                f"expected {expected[key]}, found {actual}",
            )
    if expected.get("driver_min"):
        driver = stack.get("driver")
        good = driver is not None and "." in driver and _as_tuple(driver) >= _as_tuple(expected["driver_min"])
        results.check("expect", "driver_floor", good, f"driver {driver}, lock needs >= {expected['driver_min']}")
    if expected.get("gpu_count"):
        count = len(stack.get("devices") or [])
        visible = stack.get("cuda_visible_devices")
        cause = f" (CUDA_VISIBLE_DEVICES={visible!r})" if visible is not None else ""
        results.check(
            "expect",
            "gpu_count",
            count == int(expected["gpu_count"]),
            f"{count} GPUs visible{cause}, expected {expected['gpu_count']}",
        )
