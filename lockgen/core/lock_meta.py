"""What a lock records about its inputs, and the digests that make freshness checkable.

Keys live in conda-lock's `custom_metadata` (a string-to-string map) under `lockgen.`:
format, stack, target, arch, driver, glibc, cuda, cuda-compat, allow-ptx-jit, cuda-window,
spec-digest, target-digest, exclude-newer, and per platform `virtual-packages.<platform>`,
`constraints.<platform>` and `index.<channel>/<subdir>` (the digest of each index read).
"""

from __future__ import annotations

import hashlib
import json
import re

from typing import TYPE_CHECKING

from lockgen.model.lock import LOCKGEN_META_FORMAT
from lockgen.model.plan import CudaWindow, SolveRequest
from lockgen.model.spec import StackSpec, Target

if TYPE_CHECKING:
    from lockgen.core.pypi_plan import PypiPlan


def canonical_digest(value: object) -> str:
    """sha256 of the canonical JSON of `value`."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def spec_digest(spec: StackSpec) -> str:
    """What every target shares: channels, dependencies (exclude-newer is recorded on its own)."""
    return canonical_digest({
        "channels": list(spec.channels),
        "dependencies": sorted(d.match_spec() for d in spec.dependencies),
    })


def target_digest(spec: StackSpec, target: Target) -> str:
    """The target as stated, with the platforms it resolves for."""
    fields = target.model_dump(mode="json", by_alias=True)
    fields["platforms"] = list(spec.platforms_of(target))
    return canonical_digest(fields)


def exclude_newer_text(spec: StackSpec) -> str:
    return spec.exclude_newer.isoformat() if spec.exclude_newer else ""


def content_hash(spec: StackSpec, target: Target, request: SolveRequest, index_digests: dict[str, str]) -> str:
    """One digest of every input of one platform's solve (conda-lock's `content_hash`)."""
    return canonical_digest({
        "spec": spec_digest(spec),
        "target": target_digest(spec, target),
        "exclude_newer": exclude_newer_text(spec),
        "virtual_packages": [v.text() for v in request.virtual_packages],
        "constraints": list(request.constraints),
        "specs": list(request.specs),
        "indexes": index_digests,
    })


def pypi_digest(spec: StackSpec) -> str:
    """The PyPI layer's inputs: requirements and options (index URLs without credentials)."""
    options = spec.pypi_options
    return canonical_digest({
        "requirements": sorted(d.requirement() + (f" @index {d.index}" if d.index else "") for d in spec.pypi_dependencies),
        "index_url": _no_credentials(options.index_url),
        "extra_index_urls": [_no_credentials(u) for u in options.extra_index_urls],
        "exclude_newer": options.exclude_newer.isoformat() if options.exclude_newer else "",
        "no_build": options.no_build,
        "python": spec.python or "",
    })


def _no_credentials(url: str) -> str:
    return re.sub(r"//[^/@]*@", "//", url)


def custom_metadata(spec: StackSpec, target: Target, window: CudaWindow | None,
                    requests: list[SolveRequest], index_digests: dict[str, str],
                    pypi: dict[str, PypiPlan] | None = None) -> dict[str, str]:
    """Everything that decided the result, as `lockgen.*` string entries (sorted when written)."""
    meta = {
        "format": LOCKGEN_META_FORMAT,
        "stack": spec.name,
        "target": target.name,
        "arch": target.arch,
        "driver": target.driver or "",
        "glibc": target.glibc,
        "cuda": target.cuda or "",
        "cuda-compat": target.cuda_compat if target.is_gpu else "",
        "allow-ptx-jit": str(target.allow_ptx_jit).lower(),
        "cuda-window": f"{window.low}..{window.high} (native {window.native})" if window else "",
        "spec-digest": spec_digest(spec),
        "target-digest": target_digest(spec, target),
        "exclude-newer": exclude_newer_text(spec),
    }
    for request in requests:
        meta[f"virtual-packages.{request.platform}"] = " ".join(v.text() for v in request.virtual_packages)
        if spec.has_conda:  # conda solve constraints mean nothing to a pure-PyPI lock
            meta[f"constraints.{request.platform}"] = "; ".join(request.constraints)
    for key, digest in index_digests.items():
        meta[f"index.{key}"] = digest
    if spec.pypi_dependencies:
        meta["pypi-digest"] = pypi_digest(spec)
        for platform, plan in sorted((pypi or {}).items()):
            meta[f"python.{platform}"] = plan.python
            meta[f"pypi-constraints.{platform}"] = "; ".join(plan.constraints)
    return {f"lockgen.{k}": v for k, v in meta.items()}
