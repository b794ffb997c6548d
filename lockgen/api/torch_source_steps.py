"""The stack's PyTorch variant indexes (`[pypi-options] torch-variants`, `torch-indexes.<cuXYZ>`, `torch-mirror`),
a step of resolve and explain: what each serves of torch for a platform and Python, read once per pair. A source
that cannot be read refuses the target that weighs it, naming the source: its choice cannot be made without it."""

from __future__ import annotations

from lockgen.adapters import release_evidence
from lockgen.core.credentials import scrub_url
from lockgen.core.torch_choice import SourceOffer
from lockgen.errors import ChannelError, LockgenError
from lockgen.model.spec import StackSpec, Target


class TorchSources:
    """Reads each variant index once per (platform, Python) for the GPU targets of one stack."""

    def __init__(self, spec: StackSpec) -> None:
        self.spec = spec
        self._seen: dict[tuple[str, str | None], tuple[SourceOffer, ...]] = {}

    def offers(self, target: Target, platform: str, python: str | None) -> tuple[SourceOffer, ...]:
        sources = self.spec.pypi_options.gpu_torch_sources()
        if not target.is_gpu or not sources:
            return ()
        if (platform, python) not in self._seen:
            cutoff = release_evidence.cutoff_of(self.spec.pypi_exclude_newer)
            found = []
            for variant, index in sources:
                try:
                    served = release_evidence.served_releases(index, variant, platform, python, cutoff)
                except LockgenError as exc:
                    raise ChannelError(
                        f"target `{target.name}` on {platform}: its torch source {variant} @ {scrub_url(index)} "
                        f"cannot be read ({exc.message})",
                        f"make it reachable, point [pypi-options] torch-indexes.{variant} or torch-mirror at a mirror "
                        f"that serves it, or take {variant} out of the stack's torch sources") from None
                found.append(SourceOffer(variant, index, served))
            self._seen[(platform, python)] = tuple(found)
        return self._seen[(platform, python)]
