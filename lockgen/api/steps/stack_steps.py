"""A step below the use cases that read a stack (resolve, explain, facts check): the stack read once (a
`LoadedStack`: its text, spec and base, located once), and the conda channels it names located through
`--channel-alias` flags and `$LOCKGEN_CHANNEL_ALIAS`, with its `exclude-newer` as a UTC cut-off. A flag
naming no channel of the stack is an error (a typo would otherwise reach the network). Also what the stack's
own text says of a target's lock (`stated_staleness`: `resolve --check`'s rule on the digests the lock keeps,
without channels or facts), which run, shell and activate check before they use a stack's lock."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from lockgen.adapters.conda.channels import locate_channel, parse_aliases, run_aliases
from lockgen.adapters.lock.stack_file import read_stack, read_stack_text
from lockgen.core.lock import lock_builder
from lockgen.core.credentials import scrub_url
from lockgen.errors import UserError
from lockgen.model.inputs import LoadedStack, StackBase

if TYPE_CHECKING:  # rattler is imported only for stacks with conda channels
    from lockgen.adapters.conda.rattler_solver import ChannelSet
    from lockgen.core.lock.freshness import Staleness
    from lockgen.model.lock import LoadedLock, Lock
    from lockgen.model.spec import Target


def load_stack(
    stack_path: Path,
    aliases: Sequence[str],
    fetch_image_base: Callable[[StackBase], bytes] | None = None,
    text: str | None = None,
) -> tuple[LoadedStack, "ChannelSet | None"]:
    """(the stack, its conda channels, or None for a pure-PyPI stack, which reads none). `fetch_image_base`:
    for a base that is an image, the bytes of the lock it carries (resolve fetches them; else the kept copy).
    `text`: the stack's text as `stack_text` read it and an edit changed it, parsed instead of the file's."""
    stack = read_stack(stack_path, fetch_image_base, text)
    spec = stack.spec
    alias_map = run_aliases(list(aliases))
    for name in parse_aliases(list(aliases)):  # a flag for this run must name a channel of this stack
        if name not in spec.channels:
            import difflib  # only for the suggestion of a misnamed alias: not imported by every resolve

            close = difflib.get_close_matches(name, list(spec.channels), n=1)
            raise UserError(
                f"--channel-alias `{name}` names no channel of {stack_path.name} (its channels: "
                f"{', '.join(scrub_url(c) for c in spec.channels) or 'none'})",
                f"did you mean `{close[0]}`?" if close else "name one of the stack's channels",
            )
    channels = [locate_channel(c, alias_map, stack_path.parent) for c in spec.channels]
    cutoff = spec.exclude_newer
    if isinstance(cutoff, dt.date) and not isinstance(cutoff, dt.datetime):
        cutoff = dt.datetime.combine(cutoff, dt.time(), tzinfo=dt.timezone.utc)
    elif isinstance(cutoff, dt.datetime) and cutoff.tzinfo is None:
        cutoff = cutoff.replace(tzinfo=dt.timezone.utc)
    if not spec.has_conda:
        return stack, None
    from lockgen.adapters.conda.rattler_solver import ChannelSet

    return stack, ChannelSet(channels, exclude_newer=cutoff)


def stated_staleness(stack: LoadedStack, target: Target, lock: LoadedLock) -> list[Staleness]:
    """Why `lock` is stale for `target` of `stack` by what the stack itself states (its requests, channels,
    target, cut-offs and base lock: `freshness.stated_reasons`); empty when it is fresh by them. The metadata
    a resolve would record is built as `resolve --check` builds it, without the channels' indexes or a solve,
    which those reasons never compare."""
    from lockgen.api.steps.team_steps import base_lock_bytes
    from lockgen.core.lock.freshness import stated_reasons
    from lockgen.core.lock.lock_builder import resolved_metadata

    spec = stack.spec
    base = (spec.extends, base_lock_bytes(stack, target).sha256) if spec.extends else None
    base_lock = stack.base_lock.lock if stack.base_lock is not None else None
    expected = resolved_metadata(spec, target, None, [], {}, {}, stack.path.name, None, "", base, None, base_lock)
    return stated_reasons(target.name, lock.lock, expected) + local_staleness(stack.path.parent, target.name, lock.lock)


def local_staleness(stack_folder: Path, target: str, lock: Lock) -> list[Staleness]:
    """`local-changed` when a local package's folder no longer matches its entry (each package named once)."""
    from lockgen.adapters.pypi import local_source
    from lockgen.core.lock.freshness import local_changed

    names = {p.name: p for p in lock.package if lock_builder.local_of(p) is not None}
    return local_changed(
        target, [reason for package in names.values() if (reason := local_source.changed(stack_folder, package))]
    )


def stack_text(stack_path: Path) -> str:
    """The stack file's text as it is on disk, read once: what `lockgen add` and `remove` edit."""
    return read_stack_text(stack_path)
