"""The one lock builder: every lock lockgen writes (resolved, frozen from an environment, imported
from another tool) is assembled here, and here only are its `lockgen.*` metadata keys named.

Keys (conda-lock's `custom_metadata`, a string-to-string map, written sorted): format, stack, target,
arch, driver, glibc, cuda, cuda-compat, allow-ptx-jit, cuda-window, spec-digest, target-digest,
exclude-newer, pypi-digest, pypi-exclude-newer (the PyPI layer's cut-off, when it has one), torch-sources
(the PyPI and PyTorch variant indexes a GPU target's torch may come from, when the stack names variant indexes);
per platform `virtual-packages.<platform>`, `constraints.<platform>`,
`python.<platform>`, `interpreter.<platform>` (the exact Python a pure-PyPI stack pins: `python = "3.11.9"`),
`pypi-constraints.<platform>`, `torch-index.<platform>` (the index the torch family was routed to: a CPU target's, or
the variant index a GPU target's torch was chosen from), `decision.<platform>` (why that torch),
`cuda-components.<platform>` (the CUDA-versioned wheels held within the window, and the rule admitting any a base holds
above it); `index.<channel>/<subdir>` (each index read);
for frozen locks `frozen-from`; for pinned ones `pinned-from`, `inventory-sha256`,
`accepted-changes.<platform>` (files that differ from their package, accepted by name with the hash
found) and `unpublished` (check-only entries); for imported ones `imported-from`, `imported-format`,
`imported-sha256`, `environment`; and `skipped` (what could not be locked, either way). Every lock records, per
platform, `package-set.<platform>`: the number of its entries and the sha256 of what each one pins (`package_set`),
so a lock whose entries were cut or edited by hand is refused when it is read (`lock_fields.check_lock`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from operator import attrgetter
from typing import TYPE_CHECKING

from lockgen.core.lock import lock_meta
from lockgen.core.credentials import scrub_text, scrub_url
from lockgen.core.pypi.torch_sources import routes_text
from lockgen.digests import canonical_list_digest
from lockgen.errors import UserError
from lockgen.model.lock import LOCKGEN_META_FORMAT, Lock, LockChannel, LockedPackage, LockMetadata

if TYPE_CHECKING:  # the stack's models: named for their fields only (a build of a lock loads none, about 15 ms)
    from lockgen.core.pypi.pypi_plan import PypiPlan
    from lockgen.model.plan import CudaWindow, SolveRequest
    from lockgen.model.spec import StackSpec, Target

SKIPPED = "skipped"


def _keys(meta: Mapping[str, str]) -> dict[str, str]:
    return {f"lockgen.{k}": v for k, v in meta.items()}


def _lock(packages: Iterable[LockedPackage], metadata: LockMetadata) -> Lock:
    """Every lock lockgen makes: packages sorted, and every URL through the one credential scrubber (a PyPI
    index's `/t/<token>/`, `user:pass@`, secret query values), whichever tool or file it came from; the
    fetchers put the host's credential back from the auth file or netrc when they download."""
    scrubbed = tuple(
        in_lock_order(tuple(p if scrub_url(p.url) == p.url else replace(p, url=scrub_url(p.url)) for p in packages))
    )
    sets = {
        f"lockgen.{PACKAGE_SET}.{platform}": package_set([p for p in scrubbed if p.platform == platform])
        for platform in metadata.platforms
    }
    return Lock(metadata=replace(metadata, custom_metadata={**metadata.custom_metadata, **sets}), package=scrubbed)


PACKAGE_SET = "package-set"


def in_lock_order(packages: Sequence[LockedPackage]) -> Sequence[LockedPackage]:
    """`packages` sorted by their sort key (platform, manager, name, version, build), stably: as given where they
    are in that order already (judged pair by pair: a sort made every entry's key at once, 600k tuples for a
    300k-package uv.lock's lock, a sixth of its import's peak memory), else sorted."""
    previous: tuple[str, str, str, str] | None = None
    previous_build = ""
    for package in packages:  # the key but the build read by one C call (`sort_key` was a Python call and a tuple)
        key = _AHEAD_OF_BUILD(package)
        if previous is not None and key <= previous:
            if key < previous or (package.build or "") < previous_build:
                return sorted(packages, key=lambda p: p.sort_key())
        previous, previous_build = key, package.build or ""
    return packages


_AHEAD_OF_BUILD = attrgetter("platform", "manager", "name", "version")  # `sort_key` less its last part


def package_set(packages: Sequence[LockedPackage]) -> str:
    """`COUNT SHA256`: how many entries one platform of a lock holds and the digest of what each pins (manager,
    name, version, build, hashes, dependencies), in the lock's order. Not the URL: it says where the bytes are, the
    hash what they are, so a mirror's URL in place of the index's is no edit of the package set; but a local
    package's URL is what it is (its folder, editable or built): pinned too."""
    ordered = in_lock_order(packages)
    return f"{len(ordered)} {canonical_list_digest(map(_pin, ordered))}"  # each pin made as it is hashed


def _pin(p: LockedPackage) -> list[object]:
    """What the package set pins of an entry; of a local entry, beyond its hash, its URL too (folder and mode),
    nothing for others, so the records of locks without local packages stay as they were (appended to the list made:
    a list unpacked into it was a call and a list more for each of 600k entries)."""
    hashes, dependencies = p.hash, p.dependencies
    pin: list[object] = [
        p.manager,
        p.name,
        p.version,
        p.build or "",
        hashes.sha256 or "",
        hashes.md5 or "",
        sorted(dependencies.items()) if dependencies else [],
    ]
    if local_of(p) is not None:
        pin.append(p.url)
    return pin


def resolved_metadata(
    spec: StackSpec,
    target: Target,
    window: CudaWindow | None,
    requests: Sequence[SolveRequest],
    index_digests: dict[str, str],
    content_hashes: dict[str, str],
    source: str,
    pypi: dict[str, PypiPlan] | None = None,
    facts_date: str = "",
    base: tuple[str, str] | None = None,
    moved: dict[str, list[str]] | None = None,
    base_lock: Lock | None = None,
) -> LockMetadata:
    """What a resolved lock records about its inputs (without `pypi`, as `resolve --check` builds it, the
    per-platform PyPI keys, which depend on the conda solution, are left out). A team lock on a base that
    is a lock (`base_lock`, one `pin` made) carries what that lock accepts of its held packages: changed
    files accepted by name and its check-only entries."""
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
        "spec-digest": lock_meta.spec_digest(spec),
        "target-digest": lock_meta.target_digest(spec, target),
        "exclude-newer": lock_meta.exclude_newer_text(spec),
        "platforms": " ".join(spec.platforms_of(target)),
        "unknown-releases": spec.unknown_releases,
        "facts-valid-as-of": facts_date,
    }
    if base is not None:  # a team stack: the base it extends and the sha256 of the base lock it was held to
        meta["extends"], meta["base-lock"] = base
    if base_lock is not None:
        meta.update(
            {
                key.removeprefix("lockgen."): value
                for key, value in base_lock.metadata.custom_metadata.items()
                if key.startswith(f"lockgen.{_ACCEPTED}.") or key == f"lockgen.{UNPUBLISHED}"
            }
        )
    for platform, lines in sorted((moved or {}).items()):  # override: the base packages the team moved
        meta[f"base-moved.{platform}"] = "; ".join(lines)
    if spec.image is not None:  # what the exported image runs and exposes: export applies it
        meta["image"] = lock_meta.image_text(spec)
    for dependency in spec.dependencies:  # each request by name, so `--check` can say which one changed
        meta[f"requested.conda.{dependency.name}"] = dependency.spec or "*"
    for requirement in spec.pypi_dependencies:
        meta[f"requested.pypi.{requirement.name}"] = lock_meta.pypi_request_text(requirement)
    for request in requests:
        meta[f"virtual-packages.{request.platform}"] = " ".join(v.text() for v in request.virtual_packages)
        if spec.has_conda:  # conda solve constraints mean nothing to a pure-PyPI lock
            meta[f"constraints.{request.platform}"] = "; ".join(request.constraints)
        elif spec.python_exact:  # the one interpreter a pure-PyPI lock was made for (a conda python is its own entry)
            meta[f"interpreter.{request.platform}"] = spec.python_exact
        if request.inferred_builds:  # conda builds of releases newer than the facts, admitted on an inferred list
            meta[f"newer-releases.{request.platform}"] = " | ".join(request.inferred_builds)
    for key, digest in index_digests.items():
        meta[f"index.{scrub_url(key)}"] = digest  # keys name channels: never their credentials
    if spec.pypi_dependencies:
        meta["pypi-digest"] = lock_meta.pypi_digest(spec)
        if cutoff := lock_meta.pypi_exclude_newer_text(spec):
            meta["pypi-exclude-newer"] = cutoff
        if sources := lock_meta.torch_sources_text(spec):
            meta["torch-sources"] = sources
        _pypi_meta(meta, pypi or {})
    # plain records built from core's own values, every one typed: the text is checked before it is written
    return LockMetadata(
        content_hash=dict(content_hashes),
        channels=tuple(LockChannel(url=scrub_url(c)) for c in spec.channels),
        platforms=tuple(r.platform for r in requests),
        sources=(source,),
        custom_metadata=_keys(meta),
    )


def _pypi_meta(meta: dict[str, str], pypi: dict[str, PypiPlan]) -> None:
    """The per-platform keys of the PyPI layer, added to `meta`."""
    for platform, plan in sorted(pypi.items()):
        meta[f"python.{platform}"] = plan.python
        meta[f"pypi-constraints.{platform}"] = "; ".join(plan.constraints)
        if plan.routes:  # the torch family, taken from its own index (a CPU target's, or a chosen variant index)
            meta[f"torch-index.{platform}"] = routes_text(plan.routes)
        if plan.components:  # the CUDA components held within the window, and any a base holds above it
            meta[f"cuda-components.{platform}"] = plan.components
        if plan.decision:  # the torch chosen and the rule that kept out the nearest newer release
            meta[f"decision.{platform}"] = plan.decision
        if plan.inferred:  # releases newer than the facts: admitted on evidence or refused, with why
            key = f"newer-releases.{platform}"
            meta[key] = " | ".join(filter(None, (meta.get(key), *plan.inferred)))


def resolved_lock(metadata: LockMetadata, packages: Iterable[LockedPackage]) -> Lock:
    return _lock(packages, metadata)


def frozen_lock(
    target: str,
    frozen_from: str,
    platform: str,
    python: str | None,
    skipped: Sequence[str],
    packages: Iterable[LockedPackage],
) -> Lock:
    """A lock pinned from an existing environment (`lockgen freeze`)."""
    meta = {"format": LOCKGEN_META_FORMAT, "target": target, "frozen-from": frozen_from}
    if python:
        meta[f"python.{platform}"] = python
    if skipped:
        meta[SKIPPED] = scrub_text(", ".join(skipped))
    return _lock(
        packages,
        LockMetadata(
            content_hash={}, channels=(), platforms=(platform,), sources=(frozen_from,), custom_metadata=_keys(meta)
        ),
    )


def imported_lock(
    target: str,
    source_name: str,
    source_format: str,
    source_sha256: str,
    environment: str | None,
    skipped: Sequence[str],
    channels: Sequence[str],
    platforms: Sequence[str],
    packages: Iterable[LockedPackage],
    virtual_packages: Mapping[str, str] | None = None,
    assumed: Sequence[str] = (),
    python: str | None = None,
) -> Lock:
    """Another tool's lock as a lockgen lock (`lockgen import`), with the virtual packages it states per
    platform (pixi v7's `__cuda=12.9`) under the key resolve uses, what the import assumed where the
    file does not say (uv's default groups without a pyproject.toml), and the CPython a PyPI lock was read for
    (`python.<platform>`, as resolve records a PyPI layer's, where no conda python is locked)."""
    packages = list(packages)
    meta = {
        "format": LOCKGEN_META_FORMAT,
        "target": target,
        "imported-from": source_name,
        "imported-format": source_format,
        "imported-sha256": source_sha256,
    }
    for platform in platforms:
        if python and not any(p.platform == platform and p.manager == "conda" and p.name == "python" for p in packages):
            meta[f"python.{platform}"] = ".".join(python.split(".")[:2])  # X.Y, as the key holds it (3.13.14 -> 3.13)
    for platform, virtual in sorted((virtual_packages or {}).items()):
        if platform in platforms:
            meta[f"virtual-packages.{platform}"] = virtual
    if environment:
        meta["environment"] = environment
    if skipped:  # what was left out is named by its text, which holds the other tool's URLs: never their credentials
        meta[SKIPPED] = scrub_text("; ".join(skipped))
    if assumed:
        meta["assumed"] = scrub_text("; ".join(assumed))
    return _lock(
        packages,
        LockMetadata(
            content_hash={p: source_sha256 for p in platforms},
            channels=tuple(LockChannel(url=scrub_url(c)) for c in channels),
            platforms=tuple(platforms),
            sources=(source_name,),
            custom_metadata=_keys(meta),
        ),
    )


_TARGET_FACTS = ("arch", "driver", "glibc", "cuda", "cuda-compat", "allow-ptx-jit")  # what a lock says of its hardware


class LockgenMeta:
    """The `lockgen.*` keys of a lock, read by name: the one reader, beside the writers above. A key the lock
    lacks reads as "" (an imported or frozen lock records no stack, arch or driver)."""

    def __init__(self, lock: Lock) -> None:
        self._lock = lock

    def _key(self, key: str) -> str:
        return self._lock.meta(key)

    def package_set(self, platform: str) -> str:
        """What `package_set` gave for `platform`'s entries when lockgen wrote the lock ("" in a lock of before)."""
        return self._key(f"{PACKAGE_SET}.{platform}")

    @property
    def target(self) -> str:
        return self._key("target")

    @property
    def stack(self) -> str:
        return self._key("stack")

    @property
    def arch(self) -> str:
        return self._key("arch")

    @property
    def driver(self) -> str:
        return self._key("driver")

    @property
    def cuda_compat(self) -> str:
        return self._key("cuda-compat")

    @property
    def cuda_window(self) -> str:
        return self._key("cuda-window")

    @property
    def extends(self) -> str:
        """What a team lock's stack extends: a stack file, a lock, or an image reference."""
        return self._key("extends")

    @property
    def base_lock(self) -> str:
        """The sha256 of the base lock a team lock was held to."""
        return self._key("base-lock")

    @property
    def image(self) -> str:
        """The stack's `[image]` settings as canonical JSON, or ""."""
        return self._key("image")

    @property
    def imported_format(self) -> str:
        return self._key("imported-format")

    @property
    def import_skipped(self) -> tuple[str, ...]:
        """What an import could not bring over, one entry each (`imported_lock` joins them with "; ")."""
        return tuple(line for line in self._key(SKIPPED).split("; ") if line)

    @property
    def assumed(self) -> tuple[str, ...]:
        return tuple(line for line in self._key("assumed").split("; ") if line)

    @property
    def target_facts(self) -> dict[str, str]:
        """The hardware the lock records (arch, driver, glibc, cuda, cuda-compat, allow-ptx-jit), those it has."""
        return {key: value for key in _TARGET_FACTS if (value := self._key(key))}

    def python(self, platform: str) -> str:
        """The Python `X.Y` the lock records for a platform (a PyPI layer's, a frozen or pinned environment's)."""
        return self._key(f"python.{platform}")

    def interpreter(self, platform: str) -> str:
        """The exact Python `X.Y.Z` a pure-PyPI lock was made for (its stack pins one), or "" (any `X.Y`)."""
        return self._key(f"interpreter.{platform}")

    def base_moved(self, platform: str) -> str:
        """The base packages a team lock moved on a platform (`override = true`), or ""."""
        return self._key(f"base-moved.{platform}")


LOCAL_SCHEME, EDITABLE_SCHEME = "local:", "editable:"  # a local package's entry: its folder relative to the stack


def local_url(path: str, editable: bool) -> str:
    """The URL a lock names a local package by: its folder relative to the stack, and how it is installed."""
    return f"{EDITABLE_SCHEME if editable else LOCAL_SCHEME}{path}"


def local_of(package: LockedPackage) -> tuple[str, bool] | None:
    """(folder relative to the stack, editable) of a local package's entry; None for a published one."""
    url = package.url
    if package.manager != "pip" or not url.startswith((EDITABLE_SCHEME, LOCAL_SCHEME)):  # asked of every entry
        return None
    editable = url.startswith(EDITABLE_SCHEME)
    return url[len(EDITABLE_SCHEME if editable else LOCAL_SCHEME) :], editable


def has_editable(packages: Iterable[LockedPackage]) -> bool:
    """Whether any of `packages` is an editable local package (read where the lock's folder is, not copied)."""
    return any(local is not None and local[1] for local in map(local_of, packages))


def refuse_local(packages: Iterable[LockedPackage], use: str) -> None:
    """Refuses the first local package of `packages` for `use` (exported, packed, rendered, proven by check --lock):
    only a published package has a file that states what it installs; materialize and run install it from its
    folder."""
    for package in packages:
        if local_of(package) is not None:
            raise UserError(
                f"`{package.name}` {package.version} is a local package ({package.url}): it has no published "
                f"wheel, so it cannot be {use}",
                "build its wheel (uv build), serve it from an index or a file:// folder and depend on it by "
                "version; materialize and run install local packages",
            )


UNPUBLISHED_SCHEME = "unpublished:"
UNPUBLISHED = "unpublished"  # the key naming a pinned lock's check-only entries
_ACCEPTED = "accepted-changes"


def unpublished_url(name: str, version: str) -> str:
    """The URL of a check-only entry: a distribution no index publishes, pinned by its RECORD's digest."""
    return f"{UNPUBLISHED_SCHEME}{name}=={version}"


def is_check_only(package: LockedPackage) -> bool:
    """Whether a lock entry is check-only (no published file: `check` and `verify` accept it, `materialize`
    cannot install it)."""
    return package.url.startswith(UNPUBLISHED_SCHEME)


def accepted_changes_text(changes: Mapping[str, str]) -> str:
    return "; ".join(f"{path} sha256={digest}" for path, digest in sorted(changes.items()))


def accepted_changes(lock: Lock, platform: str) -> dict[str, str]:
    """The files a pinned lock accepts as changed from their package: prefix-relative path -> sha256."""
    text = lock.meta(f"{_ACCEPTED}.{platform}")
    changes = {}
    for item in filter(None, (part.strip() for part in text.split(";"))):
        path, _, digest = item.rpartition(" sha256=")
        changes[path] = digest
    return changes


def pinned_lock(
    target: str,
    inventory_name: str,
    inventory_sha256: str,
    platform: str,
    python: str,
    accepted: Mapping[str, str],
    unpublished: Sequence[str],
    packages: Iterable[LockedPackage],
) -> Lock:
    """A lock pinned from a node's inventory (`lockgen pin`): every distribution at its index wheel."""
    meta = {
        "format": LOCKGEN_META_FORMAT,
        "target": target,
        "pinned-from": inventory_name,
        "inventory-sha256": inventory_sha256,
        f"python.{platform}": python,
    }
    if accepted:
        meta[f"{_ACCEPTED}.{platform}"] = accepted_changes_text(accepted)
    if unpublished:
        meta[UNPUBLISHED] = ", ".join(unpublished)
    return _lock(
        packages,
        LockMetadata(
            content_hash={platform: inventory_sha256},
            channels=(),
            platforms=(platform,),
            sources=(inventory_name,),
            custom_metadata=_keys(meta),
        ),
    )
