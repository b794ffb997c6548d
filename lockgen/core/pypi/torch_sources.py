"""Where a target's torch comes from when it is not PyPI's default build: a CPU target takes torch (and
torchvision, torchaudio) from a CPU index, and its lock is refused if it holds any CUDA package.

Decided from the facts (`pytorch_pypi_wheels`): on linux-64 every torch release on pypi.org is a CUDA build
(cu117 ... cu132, pulling `nvidia-*` wheels and, from 2.11, `cuda-toolkit`); on linux-aarch64 PyPI's torch is
a CPU build only from 2.4 to 2.10 and a cu130/cu132 build from 2.11 on. So PyPI cannot give a current CPU
torch on either platform, and a CPU target routes the torch family to `[pypi-options] torch-indexes.cpu`
(default PyTorch's own `https://download.pytorch.org/whl/cpu`, whose wheels are `2.9.1+cpu`) on both, through
uv's explicit index for those names only; every other package still comes from the stack's indexes. torch
reached only through another package (`transformers[torch]`) is not routed: the lock check below refuses
it, naming the fix. An index that cannot be reached is uv's ChannelError, named with this index.
"""

from __future__ import annotations

import re

from lockgen.core.credentials import scrub_url
from lockgen.errors import TargetError
from lockgen.model.lock import LockedPackage
from lockgen.model.names import normalize

TYPE_CHECKING = False
if TYPE_CHECKING:  # the stack's models: named for their fields only (a build of a lock loads none)
    from lockgen.model.spec import StackSpec, Target

TORCH_FAMILY = ("torch", "torchvision", "torchaudio")
_CUDA_PACKAGE = re.compile(r"(nvidia-.*|cuda-.*|triton|pytorch-triton)")
_CUDA_LOCAL = re.compile(r"\+cu\d+")


def cpu_routes(spec: StackSpec, target: Target, held: frozenset[str] | set[str]) -> tuple[tuple[str, str], ...]:
    """(package, index) pairs for a CPU target whose requested torch family comes from PyPI (conda holds
    none of it): each requested family member, and torch itself whenever one is requested."""
    if target.is_gpu or "torch" in held:
        return ()
    return family_routes(spec, spec.pypi_options.cpu_torch_index())


def family_routes(spec: StackSpec, index: str) -> tuple[tuple[str, str], ...]:
    """The requested torch family members, and torch itself whenever one is requested, sent to `index` (a CPU
    target's, or the variant index a GPU target's torch was chosen from: `torch_choice`)."""
    requested = {normalize(d.name) for d in spec.pypi_dependencies} & set(TORCH_FAMILY)
    if not requested:
        return ()
    return tuple((name, index) for name in TORCH_FAMILY if name in requested | {"torch"})


def routes_text(routes: tuple[tuple[str, str], ...]) -> str:
    """How the lock records the routes: `torch torchvision @ URL` (credentials scrubbed)."""
    by_index: dict[str, list[str]] = {}
    for name, index in routes:
        by_index.setdefault(scrub_url(index), []).append(name)
    return "; ".join(f"{' '.join(names)} @ {index}" for index, names in by_index.items())


def check_cpu_lock(
    target: Target, platform: str, packages: list[LockedPackage], routes: tuple[tuple[str, str], ...]
) -> None:
    """Refuses a CPU target's PyPI packages when they hold a CUDA build of torch or any CUDA package."""
    if target.is_gpu:
        return
    by_name = {normalize(p.name): p for p in packages}
    cuda = sorted(f"{p.name} {p.version}" for name, p in by_name.items() if _CUDA_PACKAGE.fullmatch(name))
    torch = by_name.get("torch")
    if torch is not None and _CUDA_LOCAL.search(torch.version):
        cuda.insert(0, f"torch {torch.version}")
    if not cuda:
        return
    where = (
        f"torch came from {routes_text(routes)}"
        if routes
        else "torch came from the stack's indexes (PyPI's is a CUDA build)"
    )
    raise TargetError(
        f"target `{target.name}` on {platform} is a CPU target but would get CUDA packages: {', '.join(cuda[:4])}"
        + (f" and {len(cuda) - 4} more" if len(cuda) > 4 else "")
        + f" ({where})",
        "name torch in [pypi-dependencies] so it comes from the CPU index ([pypi-options] torch-indexes.cpu), or "
        "point torch-indexes.cpu at an index of CPU builds",
    )
