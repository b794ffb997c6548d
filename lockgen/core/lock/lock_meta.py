"""The digests of a stack's inputs that make a lock's freshness checkable: the spec, each target,
the PyPI layer, and one content hash per platform's solve. The keys they are written under belong to
`core.lock.lock_builder`."""

from __future__ import annotations

from dataclasses import fields as fields_of

from lockgen.core.credentials import scrub_url
from lockgen.digests import canonical_digest, canonical_json

TYPE_CHECKING = False
if TYPE_CHECKING:  # the stack's models: named for their fields only (a build of a lock loads none)
    from lockgen.model.plan import SolveRequest
    from lockgen.model.spec import ImageSettings, PypiDependency, StackSpec, Target


def spec_digest(spec: StackSpec) -> str:
    """What every target shares: channels, dependencies, the `[image]` settings when there are any
    (exclude-newer is recorded on its own)."""
    shared: dict[str, object] = {
        "channels": list(spec.channels),
        "dependencies": sorted(d.match_spec() for d in spec.dependencies),
    }
    if spec.image is not None:
        shared["image"] = image_text(spec)
    return canonical_digest(shared)


def image_text(spec: StackSpec) -> str:
    """The `[image]` settings as the lock records them: canonical JSON, for export to apply (`services` only
    when there are any, so the locks of stacks without them read as before)."""
    assert spec.image is not None
    settings = _as_written(spec.image)
    if not settings["services"]:
        del settings["services"]
    return canonical_json(settings).decode()


def target_digest(spec: StackSpec, target: Target) -> str:
    """The target as stated, with the platforms it resolves for."""
    fields = target_fields(target)
    fields["platforms"] = list(spec.platforms_of(target))
    return canonical_digest(fields)


def target_fields(target: Target) -> dict[str, object]:
    """The target's fields under their `stack.toml` names, each as JSON holds it (what pydantic's
    `model_dump(mode="json", by_alias=True)` made of the model before it: tests/test_lock_meta.py holds them alike)."""
    return _as_written(target)


def _as_written(record: Target | ImageSettings) -> dict[str, object]:
    """A stack record's fields, in their order, under their `stack.toml` names (`alias`), as JSON holds them. A
    field of a type JSON does not hold as itself is refused, not guessed at."""
    return {item.metadata.get("alias", item.name): _as_json(getattr(record, item.name)) for item in fields_of(record)}


def _as_json(value: object) -> object:
    if isinstance(value, tuple):
        return [_as_json(item) for item in value]
    if isinstance(value, dict):
        return {key: _as_json(item) for key, item in value.items()}
    if value is None or isinstance(value, (str, bool, int)):
        return value
    raise TypeError(f"a stack field of type {type(value).__name__} has no JSON form here: give it a JSON form")


def exclude_newer_text(spec: StackSpec) -> str:
    return spec.exclude_newer.isoformat() if spec.exclude_newer else ""


def pypi_exclude_newer_text(spec: StackSpec) -> str:
    """The PyPI layer's cut-off as the lock records it (`[pypi-options]`'s, else the stack's), or ""."""
    cutoff = spec.pypi_exclude_newer
    return cutoff.isoformat() if cutoff else ""


def torch_sources_text(spec: StackSpec) -> str:
    """The torch sources a GPU target weighs, as the lock records them: the stack's index, then each PyTorch
    variant index (`cu126 @ URL`, credentials scrubbed); "" when the stack names none."""
    sources = spec.pypi_options.gpu_torch_sources()
    if not sources:
        return ""
    return "; ".join([scrub_url(spec.pypi_options.index_url)] + [f"{v} @ {scrub_url(u)}" for v, u in sources])


def content_hash(
    spec: StackSpec, target: Target, request: SolveRequest, index_digests: dict[str, str | list[str]]
) -> str:
    """One digest of every input of one platform's solve (conda-lock's `content_hash`)."""
    return canonical_digest(
        {
            "spec": spec_digest(spec),
            "target": target_digest(spec, target),
            "exclude_newer": exclude_newer_text(spec),
            "virtual_packages": [v.text() for v in request.virtual_packages],
            "constraints": list(request.constraints),
            "specs": list(request.specs),
            "indexes": index_digests,
        }
    )


def pypi_digest(spec: StackSpec) -> str:
    """The PyPI layer's inputs: requirements and options (index URLs without credentials); its cut-off is
    recorded on its own (`pypi_exclude_newer_text`), so `--check` names a changed one."""
    options = spec.pypi_options
    indexes: dict[str, object] = {}  # each only when set, so the digests of stacks without them stay as they were
    if options.torch_indexes:
        indexes["torch_indexes"] = {v: scrub_url(u) for v, u in sorted(options.torch_indexes.items())}
    if options.torch_variants:
        indexes["torch_variants"] = sorted(options.torch_variants)
    if options.torch_mirror:
        indexes["torch_mirror"] = scrub_url(options.torch_mirror)
    return canonical_digest(
        {
            **indexes,
            "requirements": sorted(
                d.requirement() + (f" @index {d.index}" if d.index else "") + _local_text(d)
                for d in spec.pypi_dependencies
            ),
            "index_url": scrub_url(options.index_url),
            "extra_index_urls": [scrub_url(u) for u in options.extra_index_urls],
            "no_build": options.no_build,
            "python": spec.python or "",
        }
    )


def pypi_request_text(requirement: PypiDependency) -> str:
    """One PyPI request as a lock records it by name: extras, specifier (`*` for any) and its own index; a local
    package's folder and whether it is installed editable."""
    extras = f"[{','.join(requirement.extras)}]" if requirement.extras else ""
    index = f" @index {scrub_url(requirement.index)}" if requirement.index else ""
    if requirement.is_local:
        return f"{extras}{_local_text(requirement).lstrip()}"
    return f"{extras}{requirement.specifier or '*'}{index}"


def _local_text(requirement: PypiDependency) -> str:
    """A local package's folder and mode as a request's text (`@path src/pkg editable`), "" for a published one."""
    if requirement.path is None:
        return ""
    return f" @path {requirement.path}" + (" editable" if requirement.editable else "")
