"""Reads a `stack.toml` from disk once for the pure parser (`core.stack.spec_parse`), turning a missing or
unreadable file into a SpecError naming it: the stack's text, its base located once (`core.stack.stack_layout`) and
read first (a base stack, or a lock: its own or the one its image carries, read once), and the spec parsed on
it, as one `LoadedStack`. Each file's TOML is read once (a `StackDocument`), for what it extends and its spec; the
spec of a text that extends nothing is validated once per bytes (`kept_inputs.keep_spec`)."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from lockgen.adapters import user_files
from lockgen.errors import LockgenError, SpecError

if TYPE_CHECKING:  # the parser and the models: imported by `read_stack`, not by a caller that only hashes the text
    from collections.abc import Callable
    from pathlib import Path

    from lockgen.model.inputs import LoadedStack, StackBase
    from lockgen.model.lock import LoadedLock
    from lockgen.model.spec import LockBase


def read_stack_text(path: Path) -> str:
    """The stack file's text, read once (an edit's starting point); a missing or unreadable file is a SpecError."""
    try:
        return user_files.read_bytes(path, user_files.STACK_LIMIT, "stack file").decode("utf-8")
    except FileNotFoundError:
        raise SpecError(f"stack file `{path}` does not exist", "pass the path of a stack.toml") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(
            f"cannot read stack file `{path}`: {exc}", "check the file's permissions and encoding"
        ) from None


def read_stack(
    path: Path, fetch_image_base: Callable[[StackBase], bytes] | None = None, text: str | None = None
) -> LoadedStack:
    """Reads and parses a stack file (and the base it `extends`, one level); every problem is a SpecError
    naming file and line. `fetch_image_base`: for a base that is an image, the bytes of the lock it carries
    (resolve fetches them and keeps them beside the team's locks); without it, the kept copy is read. `text`:
    the stack's text already read (an edit about to be written), parsed instead of the file's."""
    from lockgen.adapters.lock import kept_inputs
    from lockgen.model.inputs import LoadedStack

    text = read_stack_text(path) if text is None else text
    sha256 = hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()
    kept = kept_inputs.kept_spec(sha256)  # only a text that extends nothing is kept: its spec is its text's alone
    if kept is not None:
        return LoadedStack(path, text, kept)  # neither the TOML reader nor the parser is imported
    from lockgen.core.stack.spec_parse import extends_of, parse_stack_text, stack_document
    from lockgen.core.stack.stack_layout import located_base

    document = stack_document(text, str(path))
    extends = extends_of(document)
    if extends is None:
        spec = parse_stack_text(document)
        kept_inputs.keep_spec(sha256, spec)
        return LoadedStack(path, text, spec)
    base = located_base(path, extends)
    if base.is_lock:
        carried = fetch_image_base(base) if base.kind == "image" and fetch_image_base is not None else None
        loaded = _base_lock(base, str(path), carried)
        return LoadedStack(path, text, parse_stack_text(document, base=lock_base(loaded, str(path))), base, loaded)
    base_document = stack_document(read_stack_text(base.path), str(base.path))
    if extends_of(base_document) is not None:
        raise SpecError(
            f"the base stack {base.path} extends another stack itself",
            "extend the stack at the root of the chain: a team stack sits on one base",
            str(path),
        )
    return LoadedStack(path, text, parse_stack_text(document, base=parse_stack_text(base_document)), base)


def _base_lock(base: StackBase, source: str, carried: bytes | None) -> LoadedLock:
    """The lock a team stack's base is (or its image carries: `carried`, its bytes when just fetched), read once."""
    from lockgen.adapters.lock.lockfile_yaml import loaded_lock, read_lock

    if carried is None and not base.path.is_file():
        raise SpecError(
            f"the base lock {base.path} does not exist",
            "resolve the team stack, which reads the lock its base image carries"
            if base.kind == "image"
            else "pin or resolve it first (lockgen pin INVENTORY --target NAME --out PATH), or fix `extends`",
            source,
        )
    try:
        return read_lock(base.path) if carried is None else loaded_lock(carried, str(base.path))
    except LockgenError as exc:
        raise SpecError(
            f"the base lock {base.path}: {exc.message}", exc.hint or "pass a lock lockgen wrote", source
        ) from None


def lock_base(loaded: LoadedLock, source: str) -> LockBase:
    """What a team stack takes from the lock it extends (its target, platforms, Python, recorded hardware)."""
    from lockgen.core.env.expected_env import lock_python  # a stack on a lock's only
    from lockgen.core.lock.lock_builder import LockgenMeta, local_of
    from lockgen.model.spec import LockBase

    lock = loaded.lock
    target = LockgenMeta(lock).target
    pythons = {lock_python(lock, platform) for platform in lock.metadata.platforms} - {None}
    if not target or len(pythons) > 1:
        raise SpecError(
            f"the base lock {loaded.source} names no target, or several Pythons",
            "extend a lock that lockgen pin, freeze or resolve wrote for one target",
            source,
        )
    if local := next((p for p in lock.package if local_of(p) is not None), None):  # its folder is the base stack's
        raise SpecError(
            f"the base lock {loaded.source} holds the local package `{local.name}` ({local.url})",
            "a team stack extends a lock of published packages: publish it and depend on it by version",
            source,
        )
    facts = LockgenMeta(lock).target_facts
    return LockBase(target=target, platforms=lock.metadata.platforms, python=next(iter(pythons), None), facts=facts)
