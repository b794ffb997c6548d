"""The stack's torch sources, a step of resolve and explain: the stack's own index (PyPI, or the mirror
`[pypi-options]` names) and its PyTorch variant indexes (`torch-variants`, `torch-indexes.<cuXYZ>`, `torch-mirror`).
Each source's torch page is read once per run; what it serves is taken from it once per platform and Python, and
so are the releases newer than the facts that the stack's index shows (their METADATA is evidence, read once per
wheel and kept in the download cache).

The stack's index is the one uv takes torch from: the index the torch entry names, else the first of the extra
indexes and then `index-url` (uv's order) that has a torch page at all. An index that answers but cannot be read
refuses the target that weighs it, naming the source: its choice cannot be made without it. Evidence of newer
releases that cannot be read keeps those releases out, told to the user and recorded in the lock."""

from __future__ import annotations

from collections.abc import Callable

from lockgen.adapters.pypi import pypi_index, release_evidence
from lockgen.core.credentials import scrub_url
from lockgen.core.gpu.facts_inference import Inference, infer_releases, newest_known
from lockgen.core.pypi.torch_choice import SourceOffer
from lockgen.errors import ChannelError, LockgenError, NotFoundError
from lockgen.model.facts import GpuFacts
from lockgen.model.names import normalize
from lockgen.model.spec import StackSpec, Target

Page = dict[str, pypi_index.IndexedWheel]


class TorchSources:
    """Reads each torch source of one stack once, for the GPU targets whose torch comes from PyPI's layer."""

    def __init__(self, facts: GpuFacts, spec: StackSpec, progress: Callable[[str], None] = lambda _: None) -> None:
        self.facts, self.spec, self.progress = facts, spec, progress
        self._pages: dict[str, Page | None] = {}
        self._offers: dict[tuple[str, str | None], tuple[SourceOffer, ...]] = {}
        self._inferred: dict[tuple[str, str | None], Inference] = {}

    def _page(self, target: Target, platform: str, name: str, index: str, missing_ok: bool) -> Page | None:
        if index not in self._pages:
            try:
                self._pages[index] = release_evidence.torch_page(index)
            except NotFoundError:
                if not missing_ok:
                    raise self._unreadable(target, platform, name, index, "it has no torch page") from None
                self._pages[index] = None
            except LockgenError as exc:
                raise self._unreadable(target, platform, name, index, exc.message) from None
        return self._pages[index]

    def _unreadable(self, target: Target, platform: str, name: str, index: str, why: str) -> ChannelError:
        where = "[pypi-options] index-url" if name == "PyPI" else f"[pypi-options] torch-indexes.{name} or torch-mirror"
        drop = "" if name == "PyPI" else f", or take {name} out of the stack's torch sources"
        return ChannelError(
            f"target `{target.name}` on {platform}: its torch source {name} @ {scrub_url(index)} cannot be read "
            f"({why})",
            f"make it reachable, point {where} at a mirror that serves it{drop}",
        )

    def stack_index(self, target: Target, platform: str) -> tuple[str, Page] | None:
        """The index uv takes torch from and its torch page; None when none of the stack's indexes has torch."""
        named = [d.index for d in self.spec.pypi_dependencies if normalize(d.name) == "torch" and d.index]
        options = self.spec.pypi_options
        for index in named[:1] or [*options.extra_index_urls, options.index_url]:
            page = self._page(target, platform, "PyPI", index, missing_ok=not named)
            if page is not None:
                return index, page
        return None

    def inference(self, target: Target, platform: str, python: str) -> Inference | None:
        """What the stack's index shows of torch releases newer than the facts on a platform (for a GPU target)."""
        if not target.is_gpu:
            return None
        if (platform, python) not in self._inferred:
            known = newest_known(self.facts, platform) or (0, 0)
            found = self.stack_index(target, platform)
            index = found[0] if found else self.spec.pypi_options.index_url
            try:
                evidence = release_evidence.newer_releases(
                    found[1] if found else {},
                    platform,
                    python,
                    known,
                    release_evidence.cutoff_of(self.spec.pypi_exclude_newer),
                )
                inferred = infer_releases(self.facts, evidence, python, self.spec.unknown_releases)
            except LockgenError as exc:  # the releases stay out, and the user and the lock are told why
                inferred = Inference(
                    (),
                    (),
                    (
                        f"torch releases newer than lockgen's facts ({known[0]}.{known[1]} on {platform}) could "
                        f"not be read from {scrub_url(index)} ({exc.message}); they stay out",
                    ),
                )
            self._inferred[(platform, python)] = inferred
            for note in inferred.notes:
                self.progress(note)
        return self._inferred[(platform, python)]

    def cpu_offer(self, target: Target, platform: str, python: str | None) -> SourceOffer:
        """What the CPU index (`torch-indexes.cpu`) serves a CPU target on a platform: its `+cpu` builds, else its
        builds without a local version (uv takes torch from it whatever the local version); an index that cannot
        be read refuses the target, as uv's resolve does."""
        index = self.spec.pypi_options.cpu_torch_index()
        page = self._page(target, platform, "cpu", index, missing_ok=False)
        assert page is not None, "a CPU index without a torch page is refused"
        cutoff = release_evidence.cutoff_of(self.spec.pypi_exclude_newer)
        served = release_evidence.served_releases(
            page, "cpu", platform, python, cutoff
        ) or release_evidence.served_releases(page, None, platform, python, cutoff)
        return SourceOffer("cpu", index, served)

    def offers(self, target: Target, platform: str, python: str | None) -> tuple[SourceOffer, ...]:
        """What each torch source serves for a GPU target on a platform: the stack's index first (`variant` ""),
        then each variant index."""
        if not target.is_gpu:
            return ()
        if (platform, python) not in self._offers:
            cutoff = release_evidence.cutoff_of(self.spec.pypi_exclude_newer)
            found = []
            stack_index = self.stack_index(target, platform)
            if stack_index is not None:
                served = release_evidence.served_releases(stack_index[1], None, platform, python, cutoff)
                found.append(SourceOffer("", stack_index[0], served))
            for variant, index in self.spec.pypi_options.gpu_torch_sources():
                page = self._page(target, platform, variant, index, missing_ok=False)
                assert page is not None, "a variant index without a torch page is refused"
                found.append(
                    SourceOffer(
                        variant, index, release_evidence.served_releases(page, variant, platform, python, cutoff)
                    )
                )
            self._offers[(platform, python)] = tuple(found)
        return self._offers[(platform, python)]
