"""The rattler adapter: reads channel indexes and solves one `SolveRequest` with py-rattler.

Local channels are read as `SparseRepoData` straight from their `repodata.json` (fast, and the
file's sha256 is the index digest); remote channels go through rattler's `Gateway` (HTTP, caching,
sharded repodata), and their digest is the sha256 of the records the solve could reach
(`closure-sha256:`), since a live channel's whole index changes hourly.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import rattler
from rattler import BuildString, GenericVirtualPackage, MatchSpec, PackageName, SparseRepoData, Version

from lockgen.adapters.conda.channels import Channel, LocalIndex, index_key, read_local_index
from lockgen.adapters.home import cache_dir
from lockgen.core.credentials import scrub_url
from lockgen.errors import ChannelError, UnsatisfiableError, UserError
from lockgen.model.lock import LockedPackage, PackageHash, dependency_map
from lockgen.model.names import shown
from lockgen.model.plan import CandidateBuild, SolveRequest


@dataclass
class ChannelSet:
    """The channels of a stack, with their indexes loaded lazily per subdir."""

    channels: list[Channel]
    exclude_newer: dt.datetime | None = None
    _local: dict[tuple[int, str], LocalIndex | None] = field(default_factory=dict)
    _sparse: dict[tuple[int, str], SparseRepoData] = field(default_factory=dict)
    _gateway: Any = None
    _closures: dict[tuple[str, tuple[str, ...]], dict[str, str]] = field(default_factory=dict)

    @property
    def all_local(self) -> bool:
        return all(c.is_local for c in self.channels)

    def _index(self, position: int, subdir: str) -> LocalIndex | None:
        key = (position, subdir)
        if key not in self._local:
            self._local[key] = read_local_index(self.channels[position], subdir)
        return self._local[key]

    def _sparse_for(self, platform: str) -> list[SparseRepoData]:
        sources = []
        for position, channel in enumerate(self.channels):
            for subdir in (platform, "noarch"):
                index = self._index(position, subdir)
                if index is None:
                    continue
                key = (position, subdir)
                if key not in self._sparse:
                    self._sparse[key] = SparseRepoData(rattler.Channel(channel.url), subdir, str(index.path))
                sources.append(self._sparse[key])
        if not sources:
            names = ", ".join(c.name for c in self.channels)
            raise ChannelError(
                f"no index for {platform} or noarch in channels {names}",
                "a channel folder needs <subdir>/repodata.json (noarch at least)",
            )
        return sources

    def gateway(self) -> Any:
        if self._gateway is None:
            # rattler's authentication middleware: credentials from $RATTLER_AUTH_FILE, the keyring or ~/.netrc
            # (see lockgen.adapters.fetch_auth), so a private channel needs none in its URL or the lock
            from rattler.networking import AuthenticationMiddleware, RetryMiddleware

            client = rattler.Client([RetryMiddleware(3), AuthenticationMiddleware()])
            self._gateway = rattler.Gateway(cache_dir=cache_dir() / "rattler", client=client)
        return self._gateway

    def _rattler_channels(self, channels: list[Channel] | None = None) -> list[Any]:
        return [rattler.Channel(c.url) for c in (self.channels if channels is None else channels)]

    def _records(self, platform: str, names: tuple[str, ...]) -> list[Any]:
        """Every record of the named packages for a platform (and noarch), from every channel."""
        if self.all_local:
            return [r for source in self._sparse_for(platform) for name in names for r in source.load_records(name)]
        groups = _run(
            self.gateway().query(self._rattler_channels(), [platform, "noarch"], list(names), recursive=False),
            "reading channels",
        )
        return [r for group in groups for r in group]

    def candidates(self, platform: str, names: tuple[str, ...]) -> list[CandidateBuild]:
        """Every build of the named packages the channels offer for a platform."""
        records = self._records(platform, names)
        return [
            CandidateBuild(
                name=r.name.normalized,
                version=str(r.version),
                build=str(r.build),
                channel=self._lock_url(r),
                depends=tuple(r.depends),
            )
            for r in records
        ]

    def index_digests(self, platform: str, specs: tuple[str, ...]) -> dict[str, str]:
        """The digest of every index a solve for `platform` reads, keyed `channel/subdir`."""
        digests: dict[str, str] = {}
        for position, channel in enumerate(self.channels):
            if channel.is_local:
                for subdir in (platform, "noarch"):
                    index = self._index(position, subdir)
                    if index is not None:
                        digests[index_key(channel, subdir)] = index.sha256
        remote = [c for c in self.channels if not c.is_local]
        if remote:
            digests.update(self._closure_digests(remote, platform, specs))
        return digests

    def _closure_digests(self, remote: list[Channel], platform: str, specs: tuple[str, ...]) -> dict[str, str]:
        """Digests of the records a solve can reach in remote channels; one query per platform and specs,
        however many targets ask."""
        key = (platform, specs)
        if key not in self._closures:
            groups = _run(
                self.gateway().query(self._rattler_channels(remote), [platform, "noarch"], list(specs), recursive=True),
                "reading channels",
            )
            digests = {}
            for channel, records in zip(remote, groups):
                for subdir in (platform, "noarch"):
                    lines = sorted(
                        f"{r.file_name} {r.sha256.hex() if r.sha256 else r.md5.hex() if r.md5 else ''}"
                        for r in records
                        if r.subdir == subdir
                    )
                    digest = hashlib.sha256("\n".join(lines).encode()).hexdigest()
                    digests[index_key(channel, subdir)] = "closure-sha256:" + digest
            self._closures[key] = digests
        return self._closures[key]

    def solve_all(
        self,
        jobs: list[tuple[SolveRequest, list[tuple[str, str, str]] | None]],
        on_done: Callable[[SolveRequest, int, float], None] = lambda *_: None,
    ) -> list[list[LockedPackage]]:
        """Solves every request concurrently (rattler solves off the event loop, so targets share the
        cores); results come back in request order, and the first failing request in that order raises."""
        coroutines = [self._timed(request, self._coroutine(request, pinned), on_done) for request, pinned in jobs]

        async def gather() -> list[Any]:
            return await asyncio.gather(*coroutines, return_exceptions=True)

        outcomes = asyncio.run(gather())
        for (request, _), outcome in zip(jobs, outcomes):
            if isinstance(outcome, BaseException):
                raise _classify(outcome, f"solving {request.label}", request.label)
        return [[self._locked(r, request.platform) for r in records] for (request, _), records in zip(jobs, outcomes)]

    @staticmethod
    async def _timed(request: SolveRequest, coroutine: Any, on_done: Callable[[SolveRequest, int, float], None]) -> Any:
        started = time.perf_counter()
        records = await coroutine
        on_done(request, len(records), time.perf_counter() - started)
        return records

    def _coroutine(self, request: SolveRequest, pinned: list[tuple[str, str, str]] | None) -> Any:
        virtual = [
            GenericVirtualPackage(PackageName(v.name), Version(v.version), BuildString(v.build))
            for v in request.virtual_packages
        ]
        try:
            specs = [MatchSpec(s) for s in request.specs]
            constraints = [MatchSpec(s) for s in request.constraints]
        except Exception as exc:  # rattler raises its own parse error types
            raise UserError(
                f"{request.label}: invalid match spec: {exc}",
                "check [dependencies] in stack.toml (conda match-spec syntax)",
            ) from None
        pinned_records = self._pinned_records(request.platform, pinned or [])
        if self.all_local:
            return rattler.solve_with_sparse_repodata(
                specs,
                self._sparse_for(request.platform),
                virtual_packages=virtual,
                constraints=constraints,
                pinned_packages=pinned_records,
                exclude_newer=self.exclude_newer,
            )
        return rattler.solve(
            self._rattler_channels(),
            specs,
            gateway=self.gateway(),
            platforms=[rattler.Subdir(request.platform), "noarch"],
            virtual_packages=virtual,
            constraints=constraints,
            pinned_packages=pinned_records,
            exclude_newer=self.exclude_newer,
        )

    def _pinned_records(self, platform: str, pinned: list[tuple[str, str, str]]) -> list[Any]:
        if not pinned:
            return []
        wanted = {(n, v, b) for n, v, b in pinned}
        records = self._records(platform, tuple(sorted({n for n, _, _ in pinned})))
        return [r for r in records if (r.name.normalized, str(r.version), str(r.build)) in wanted]

    def _locked(self, record: Any, platform: str) -> LockedPackage:
        return LockedPackage(
            name=record.name.normalized,
            version=str(record.version),
            manager="conda",
            platform=platform,
            dependencies=dependency_map(record.depends),
            url=self._lock_url(record),
            hash=PackageHash(
                md5=record.md5.hex() if record.md5 else None, sha256=record.sha256.hex() if record.sha256 else None
            ),
            build=str(record.build),
            category="main",
            optional=False,
        )

    def _lock_url(self, record: Any) -> str:
        url = str(record.url)
        for position, channel in enumerate(self.channels):
            if channel.is_local and url.startswith(channel.url.rstrip("/") + "/"):
                index = self._index(position, record.subdir)
                if index is not None:
                    return index.lock_url(record.file_name)
            mirror = channel.location.rstrip("/") + "/"
            if not channel.is_local and channel.canonical_base and url.startswith(mirror):
                return channel.canonical_base + "/" + url[len(mirror) :]
        return scrub_url(url)


def _run(coroutine: Any, context: str) -> Any:
    try:
        return asyncio.run(coroutine)
    except Exception as exc:
        raise _classify(exc, context) from None


def _classify(exc: BaseException, context: str, request_label: str = "") -> Exception:
    """A rattler exception as lockgen's error, with one line of context."""
    if isinstance(exc, (UserError, ChannelError)):
        return exc
    text = str(exc).strip()
    kind = type(exc).__name__
    if "Solver" in kind or "Unsolvable" in kind or "cannot be installed" in text or "no candidates" in text.lower():
        return UnsatisfiableError(f"{context}: no solution", text, request_label)
    first = text.splitlines()[0] if text else kind
    if "Fetch" in kind or "Gateway" in kind or "connect" in text.lower() or "io error" in text.lower():
        return ChannelError(
            f"{context}: cannot read channel: {first}",
            "check the channel URL and the network, or use --channel-alias NAME=PATH for a local mirror",
        )
    return ChannelError(f"{context}: {kind}: {first}", "run with -v for details")


def check_match_spec(spec: str, hint: str) -> None:
    """Refuses a conda match spec rattler cannot parse (`numpy >>1`) before anything is solved or written."""
    try:
        MatchSpec(spec)
    except Exception as exc:  # rattler raises its own parse error types
        raise UserError(f"`{shown(spec, 80)}` is not a conda match spec: {shown(str(exc), 200)}", hint) from None
