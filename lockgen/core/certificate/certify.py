"""Certification logic, pure: expectations from a lock, the early hardware refusal, the checks on how the
multi-GPU part ran (every GPU visible to it, as many ranks as asked for), the certificate body, and the
comparison of two certificates' figures."""

from __future__ import annotations

import math
from dataclasses import dataclass

from lockgen.core.certificate.envelopes import envelope_checks
from lockgen.core.certificate.failure_causes import likely_cause
from lockgen.core.certificate.numerics import NumericsReference, numerics_of, reference_check
from lockgen.core.gpu.facts import load_facts
from lockgen.core.lock.lock_builder import LockgenMeta
from lockgen.core.gpu.versions import as_tuple, major_minor
from lockgen.errors import TargetError
from lockgen.model.certificate import (
    CertificateBody,
    Check,
    DistributedRun,
    Figure,
    FigureReadings,
    Figures,
    Hardware,
    KernelReport,
    Subject,
)
from lockgen.model.lock import Lock
from lockgen.model.names import escaped
from lockgen.model.json_values import JsonObject, as_object, list_at, object_at
from verify.schema import COLLECTIVES

LOWER_IS_BETTER_UNITS = ("ms", "us", "s")
ATTRIBUTED = ("performance", "training", "graphs")  # kernel checks whose failure a node fault can explain


def expectations_from_lock(lock: Lock, platform: str) -> JsonObject:
    """What the lock promises the environment holds: torch, CUDA, cuDNN and NCCL versions and the driver floor."""
    packages = {p.name: p for p in lock.packages_for(platform)}
    expected: JsonObject = {}
    torch = packages.get("pytorch") or packages.get("torch")
    if torch is not None:
        expected["torch"] = torch.version.split("+")[0]
    cuda = packages.get("cuda-version")
    if cuda is not None:
        expected["cuda"] = cuda.version
    for name in ("cudnn", "nccl"):
        if name in packages:
            expected[name] = packages[name].version
    if cuda is not None:
        facts = load_facts()
        key = f"{major_minor(cuda.version)[0]}.{major_minor(cuda.version)[1]}"
        toolkit = facts.cuda_toolkits.get(key)
        if LockgenMeta(lock).cuda_compat == "minor":
            compat = facts.minor_version_compat.get(str(major_minor(cuda.version)[0]))
            expected["driver_min"] = compat.min_driver if compat else (toolkit.min_driver if toolkit else None)
        elif toolkit is not None:
            expected["driver_min"] = toolkit.min_driver
    return {k: v for k, v in expected.items() if v}


def refuse_wrong_hardware(
    arch: str, names: tuple[str, ...], capabilities: tuple[str, ...], driver: str | None, driver_min: str | None
) -> None:
    """Before running anything: the host's GPUs must be the arch, and its driver at least the lock's floor."""
    if arch == "cpu":
        return
    if not names:
        raise TargetError(
            f"no NVIDIA GPU found on this host, but --arch is {arch}",
            "run on the target hardware, or use --arch cpu for the CPU checks",
        )
    facts = load_facts()
    wanted = facts.archs[arch].compute_capability if arch in facts.archs else arch
    wrong = sorted({f"{n} ({c})" for n, c in zip(names, capabilities) if c != wanted})
    if wrong:
        raise TargetError(
            f"this host's GPUs are {', '.join(wrong)}, not {arch} (compute capability {wanted})",
            "certify on the hardware the lock targets, or pass the matching --arch",
        )
    if driver_min and driver and as_tuple(driver) < as_tuple(driver_min):
        raise TargetError(
            f"driver {driver} is older than {driver_min}, the floor of the lock's CUDA",
            "upgrade the driver, or certify a lock resolved for this driver",
        )


def gpus_not_visible(arch: str, gpus: int, stack: JsonObject | None) -> Check | None:
    """The failed `gpus_visible` check when the environment sees fewer of the `gpus` GPUs than the multi-GPU
    checks need (the single-GPU kernel's `stack` lists the devices it saw), naming `CUDA_VISIBLE_DEVICES` when
    the kernel saw it set; None when it sees them all (then the multi-GPU checks run)."""
    visible = len(list_at(stack or {}, "devices"))
    if gpus <= 1 or arch == "cpu" or visible >= gpus:
        return None
    cause = (stack or {}).get("cuda_visible_devices")
    return Check(
        category="distributed",
        name="gpus_visible",
        passed=False,
        detail=f"the environment sees {visible} of the {gpus} GPUs the multi-GPU checks need"
        + (f" (CUDA_VISIBLE_DEVICES={cause!r})" if cause is not None else "")
        + "; the NCCL and DDP checks did not run",
    )


def wrong_world_size(ran: int | None, gpus: int, nodes: int, several_nodes: bool) -> Check | None:
    """The failed `world_size` check when the multi-GPU run had another number of ranks than `gpus` per node
    on `nodes` nodes; None when it had them all."""
    world = gpus * nodes
    if ran == world:
        return None
    return Check(
        category="distributed",
        name="world_size",
        passed=False,
        detail=f"{ran} ranks ran, {world} expected" + (f" ({nodes} nodes of {gpus})" if several_nodes else ""),
    )


def clock_limits_seen(telemetry: JsonObject) -> tuple[str, ...]:
    """Every clock limit (power cap, thermal slowdown...) any GPU reported in any part of the run."""
    names = {
        str(name)
        for part in telemetry.values()
        for gpu in object_at(as_object(part), "gpus").values()
        for name in list_at(as_object(gpu), "clock_limits_seen")
    }
    return tuple(sorted(names))


def build_body(
    *,
    created: str,
    tool: str,
    arch: str,
    mode: str,
    subject: Subject,
    hardware: Hardware,
    single: KernelReport,
    distributed: KernelReport | None,
    kernel_sha256: dict[str, str],
    extra_checks: list[Check],
    duration_s: float,
    rendezvous: str | None = None,
    collectives_not_run: str | None = None,
    references: tuple[NumericsReference, ...] = (),
    numerics_environment: str | None = None,
) -> CertificateBody:
    """The certificate body: every kernel check, the envelope checks, merged figures and telemetry, the numerics
    fingerprint under `numerics_environment` (the environment part of its key; the subject's digest when not
    given) and judged against `references` when any were pinned, and how the multi-GPU checks ran (ranks,
    nodes, this node's rank, the rendezvous endpoint), or why they did not."""
    figures: Figures = {group: dict(entries) for group, entries in single.figures.items()}
    if collectives_not_run:
        figures.setdefault(COLLECTIVES.group, {})[COLLECTIVES.name] = Figure(
            value=None, unit="", reason=collectives_not_run
        )
    checks = list(extra_checks) + list(single.checks)
    telemetry: JsonObject = {"single": single.telemetry}
    if distributed is not None:
        checks += list(distributed.checks)
        for group, entries in distributed.figures.items():
            figures.setdefault(group, {}).update(entries)
        telemetry["distributed"] = distributed.telemetry
    stack = single.stack or {}
    limits = clock_limits_seen(telemetry)
    cause = likely_cause(stack, limits)
    checks = [
        c.model_copy(update={"detail": c.detail + cause}) if cause and not c.passed and c.category in ATTRIBUTED else c
        for c in checks
    ]
    checks += envelope_checks(arch, figures, stack, hardware.interconnect, hardware.gpu_count, limits)
    numerics = numerics_of(single.numerics, hardware, numerics_environment or subject.environment_digest)
    if references:
        checks.append(reference_check(numerics, stack, references))
    return CertificateBody(
        created=created,
        tool=tool,
        arch=arch,
        mode=mode,
        subject=subject,
        hardware=hardware,
        stack=stack,
        checks=tuple(checks),
        figures=figures,
        telemetry=telemetry,
        kernel_sha256=kernel_sha256,
        passed=all(c.passed for c in checks),
        duration_s=duration_s,
        distributed=None
        if distributed is None
        else DistributedRun(
            world_size=distributed.world_size or 0,
            nodes=distributed.nodes or 1,
            node_rank=distributed.node_rank or 0,
            backend=distributed.backend,
            rendezvous=rendezvous,
        ),
        numerics=numerics,
    )


@dataclass(frozen=True)
class FigureChange:
    name: str
    unit: str
    old: float | None
    new: float | None
    change: float | None  # relative, positive = better
    regression: bool
    missing: str | None = None  # "old" or "new": the certificate without a value for a figure the other has

    def line(self) -> str:
        """The row `cert compare` prints: the name and unit (a certificate's text) escaped before the columns are
        laid out, so a row is one line whatever the certificate says."""

        def show(value: float | None) -> str:
            return "-" if value is None else f"{value:.4g}"

        delta = "" if self.old is None or self.new is None or self.old == 0 else f" ({self.change_text()})"
        flag = "  REGRESSION" if self.regression else (f"  MISSING from {self.missing}" if self.missing else "")
        return (
            f"{escaped(self.name):<40} {show(self.old):>10} -> {show(self.new):<10} {escaped(self.unit)}{delta}{flag}"
        )

    def change_text(self) -> str:
        """The change as a person reads it: `-20.0%`, or, where it is too large for a number (a value of 1e-300
        against one of 1e300, or a percentage past a float's range), which way it went: `change` is then None (or
        finite), as `--json` says it."""
        if self.change is not None and abs(self.change) < 1e4:
            return f"{self.change:+.1%}"
        if self.change is not None and math.isfinite(self.change * 100):  # 1e20: not twenty digits of percent
            return f"{self.change * 100:+.3g}%"
        return "worse, by too much to state" if self.regression else "better, by too much to state"


def relative_change(old: float, new: float) -> float | None:
    """`(new - old) / |old|`: positive when `new` is the higher; None when it is no finite number (`old` zero, or a
    change beyond a float's range: 1e-300 to 1e300), so no infinity reaches a line or `--json`. Divided by `|old|`,
    so a rise from a negative value is a rise; the difference taken as two quotients where it alone would overflow
    (-1e308 to 1e308 is +200%)."""
    if old == 0:
        return None
    change = (new - old) / abs(old)
    if not math.isfinite(change):
        change = new / abs(old) - math.copysign(1.0, old)
    return change if math.isfinite(change) else None


def compare_figures(old: FigureReadings, new: FigureReadings, noise: float) -> list[FigureChange]:
    """Each figure's change from `old` to `new` (their values finite or null: the certificate model refuses any
    other); worse by more than `noise` (a fraction, finite and not negative: `--noise` is checked so) is a
    regression, a change too large to be a number (`relative_change`) one whenever it is worse, and a value in one
    only is `missing` from the other."""
    rows = []
    names = sorted({(g, n) for g, e in old.items() for n in e} | {(g, n) for g, e in new.items() for n in e})
    for group, name in names:
        a, b = old.get(group, {}).get(name), new.get(group, {}).get(name)
        unit = (b and b["unit"]) or (a and a["unit"]) or ""
        x, y = a and a["value"], b and b["value"]
        change, regression = None, False
        if x is not None and y is not None:
            lower_is_better = (unit.split() or [""])[0] in LOWER_IS_BETTER_UNITS
            change = relative_change(x, y)
            if change is not None and lower_is_better:
                change = -change
            worse = y > x if lower_is_better else y < x
            regression = x != 0 and worse and (change is None or change < -noise)
        missing = "old" if x is None and y is not None else ("new" if y is None and x is not None else None)
        rows.append(FigureChange(f"{group}/{name}", unit, x, y, change, regression, missing))
    return rows
