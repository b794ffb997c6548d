"""Parses `stack.toml` (the standard library's TOML reader; tomlkit for a text it refuses, whose error names
the line) into a frozen `StackSpec`, with file and line in every error (`spec_locator` finds the line): the
stack's boundary, where its tables are validated by the models of `spec_models` and handed on as plain records.
"""

from __future__ import annotations

import datetime as dt
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from lockgen.core.stack.spec_locator import Locator, repeated_line
from lockgen.errors import SpecError
from lockgen.core.stack.spec_models import (
    Dependency,
    ImageSettings,
    PypiDependency,
    PypiOptions,
    StackSpec,
    Target,
    fields_of,
    plain_spec,
)
from lockgen.model import spec as records

_TOP_TABLES = ("stack", "dependencies", "pypi-dependencies", "pypi-options", "targets", "image")
_STACK_KEYS = ("name", "channels", "platforms", "exclude-newer", "python", "unknown-releases", "extends", "override")
_INHERITED_KEYS = ("platforms", "exclude-newer", "python", "unknown-releases")  # a team stack takes the base's
_DEP_TABLE_KEYS = ("version", "build")
_PYPI_TABLE_KEYS = ("version", "extras", "index", "path", "editable")
_PYPI_OPTION_KEYS = (
    "index-url",
    "extra-index-urls",
    "exclude-newer",
    "no-build",
    "torch-indexes",
    "torch-variants",
    "torch-mirror",
)
_IMAGE_KEYS = ("entrypoint", "cmd", "env", "workdir", "user", "exposed-ports", "labels", "volumes", "services")
_HINT_KEYS = {
    "stack": "keys of [stack]: " + ", ".join(_STACK_KEYS),
    "target": "keys of a target: arch, driver, platforms, glibc, cuda, cuda-compat, allow-ptx-jit",
    "dependency": 'a dependency is a match spec string ("2.6.*") or a table { version = "2.6.*", build = "cuda*" }',
    "pypi": (
        'a PyPI dependency is a PEP 440 specifier (">=2.4"), '
        'a table { version = ">=4.40", extras = ["torch"], index = "URL" }, '
        'or a local package { path = "src/mypkg", editable = true }'
    ),
    "pypi-options": "keys of [pypi-options]: " + ", ".join(_PYPI_OPTION_KEYS),
    "image": "keys of [image]: " + ", ".join(_IMAGE_KEYS),
}


@dataclass(frozen=True)
class StackDocument:
    """A stack file's text and its TOML tables, read once: what `extends_of` and `parse_stack_text` both take, so
    a command that asks what a stack extends and then parses it reads the TOML once."""

    text: str
    source: str
    tables: dict[str, object]


def stack_document(text: str, source: str = "stack.toml") -> StackDocument:
    """The stack's tables, read once (`_document`); every problem is a SpecError naming `source` and the line."""
    return StackDocument(text, source, _document(text, source))


def extends_of(stack: str | StackDocument, source: str = "stack.toml") -> str | None:
    """The base stack a stack's `[stack] extends` names, or None (the text is parsed in full later)."""
    read = stack if isinstance(stack, StackDocument) else stack_document(stack, source)
    text, source, document = read.text, read.source, read.tables
    table = document.get("stack")
    value = table.get("extends") if isinstance(table, dict) else None
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise Locator(text, source).error(
            "`extends` must name a base stack file", 'write extends = "../platform/stack.toml"', ("stack", "extends")
        )
    return value


def parse_stack_text(
    stack: str | StackDocument, source: str = "stack.toml", base: records.StackSpec | records.LockBase | None = None
) -> records.StackSpec:
    """Parses the text of a stack file (or its `StackDocument`, read already); every problem is a SpecError
    naming `source` and the line. A stack that `extends` another is parsed on top of `base`, whose channels,
    platforms, targets and rules it takes; one that extends a lock, on top of what the lock says (its target,
    platforms and Python)."""
    read = stack if isinstance(stack, StackDocument) else stack_document(stack, source)
    document = read.tables
    locator = Locator(read.text, read.source)
    if isinstance(base, records.LockBase):
        return plain_spec(_team_stack_on_lock(document, locator, base))
    if base is not None:
        return plain_spec(_team_stack(document, locator, base))
    return plain_spec(_stack(document, locator))


def _document(text: str, source: str) -> dict[str, object]:
    """The stack's tables, read by the standard library's TOML reader (about ten times tomlkit's speed, and
    tomlkit's import, about 30 ms, is then never paid); a text it refuses goes to tomlkit, whose error names the
    line (and which reads what it can, as before)."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        pass
    except (RecursionError, ValueError) as exc:  # nested past the parser, or an integer past Python's 4,300 digits
        raise SpecError(
            f"not a stack: {_past_limits(exc)}",
            "a stack.toml nests a few tables and holds short values: use one lockgen or a person wrote",
            source,
        ) from None
    import tomlkit
    from tomlkit.exceptions import KeyAlreadyPresent, ParseError

    try:
        return tomlkit.parse(text).unwrap()
    except ParseError as exc:
        raise SpecError(
            f"malformed TOML: {exc.args[0] if exc.args else exc}".split(" at line")[0],
            "fix the TOML syntax at that line",
            source,
            exc.line,
        ) from None
    except KeyAlreadyPresent as exc:  # tomlkit names the key but not the line
        key = str(exc).split('"')[1] if str(exc).count('"') >= 2 else ""
        raise SpecError(
            f"key `{key}` is set twice in one table", "keep one of the two lines", source, repeated_line(text, key)
        ) from None


def _past_limits(exc: BaseException) -> str:
    """What a TOML or YAML reader met past its limits, in words (the exception's own text can be 4,300 digits)."""
    return (
        "nested deeper than a reader goes"
        if isinstance(exc, RecursionError)
        else "a number with more digits than a reader takes"
    )


def _stack_table(
    document: dict[str, object], locator: "Locator", refused: Callable[[str], None] = lambda _: None
) -> dict[str, object]:
    """The document's [stack] table, once every top-level table and [stack] key is a known one; `refused(key)`
    raises for a known key this kind of stack may not set (checked key by key, in the file's order)."""
    for key in document:
        if key not in _TOP_TABLES:
            raise locator.error(f"unknown table `{key}`", f"top-level tables: {', '.join(_TOP_TABLES)}", (key,))
    stack = _table(document, "stack", locator)
    for key in stack:
        if key not in _STACK_KEYS:
            raise locator.error(f"unknown key `{key}` in [stack]", _HINT_KEYS["stack"], ("stack", key))
        refused(key)
    return stack


def _stack(document: dict[str, object], locator: "Locator") -> StackSpec:
    stack = _stack_table(document, locator)
    conda = (
        _table(document, "dependencies", locator)
        if "dependencies" in document or "pypi-dependencies" not in document
        else {}
    )
    dependencies = tuple(_dependency(n, v, locator) for n, v in conda.items())
    pypi = _table(document, "pypi-dependencies", locator) if "pypi-dependencies" in document else {}
    pypi_dependencies = tuple(_pypi_dependency(n, v, locator) for n, v in pypi.items())
    pypi_options = _pypi_options(document.get("pypi-options"), locator)
    image = _image(document.get("image"), locator)
    targets_table = _table(document, "targets", locator)
    if not targets_table:
        raise locator.error("no targets", "add at least one [targets.NAME] table with `arch`", ("targets",))
    targets = tuple(_target(n, v, locator) for n, v in targets_table.items())
    fields: dict[str, object] = {k.replace("-", "_"): v for k, v in stack.items()}
    fields["exclude_newer"] = _exclude_newer(stack.get("exclude-newer"), locator, ("stack", "exclude-newer"))
    try:
        return StackSpec(
            dependencies=dependencies,
            pypi_dependencies=pypi_dependencies,
            pypi_options=pypi_options,
            targets=targets,
            image=image,
            **fields,
        )
    except ValidationError as exc:
        raise locator.from_validation(exc, ("stack",), _HINT_KEYS["stack"]) from None


def _team_stack(document: dict[str, object], locator: "Locator", base: records.StackSpec) -> StackSpec:
    """A team stack on a base: the base's platforms, targets and rules; its dependencies added to the base's."""
    where = _table(document, "stack", locator)["extends"]  # a text: `extends_of` found it so

    def refused(key: str) -> None:
        if key in _INHERITED_KEYS:
            raise locator.error(
                f"`{key}` comes from the base stack ({where})",
                f"remove it here, or change it in {where}",
                ("stack", key),
            )

    stack = _stack_table(document, locator, refused)
    for table in ("targets", "pypi-options"):
        if table in document:
            raise locator.error(
                f"[{table}] comes from the base stack ({where})", f"remove it here, or change it in {where}", (table,)
            )
    conda = document.get("dependencies") or {}
    pypi = document.get("pypi-dependencies") or {}
    if not isinstance(conda, dict) or not isinstance(pypi, dict):
        raise locator.error("dependencies must be tables", "write them as [dependencies] and [pypi-dependencies]", ())
    added = tuple(_dependency(n, v, locator) for n, v in conda.items())
    added_pypi = tuple(_pypi_dependency(n, v, locator) for n, v in pypi.items())
    if not added and not added_pypi:
        raise locator.error(
            "the team stack adds no dependencies", "add [dependencies] or [pypi-dependencies] on top of the base", ()
        )
    if local := next((d.name for d in base.pypi_dependencies if d.is_local), None):  # its path is the base's folder's
        raise locator.error(
            f"the base stack's `{local}` is a local package",
            f"a team stack extends a base of published packages: publish `{local}` and depend on it by version "
            f"in {where}",
            (),
        )
    held = {d.name for d in base.dependencies} | {d.name for d in base.pypi_dependencies}
    for table, name in [
        *(("dependencies", d.name) for d in added),
        *(("pypi-dependencies", d.name) for d in added_pypi),
    ]:
        if name in held:
            raise locator.error(
                f"`{name}` is the base's dependency, held at its locked build",
                f"remove it here; to move it, update the base ({where})",
                (table, name),
            )
    added_channels = stack.get("channels", ())
    if not isinstance(added_channels, list | tuple):
        raise locator.error("`channels` must be a list", 'write channels = ["conda-forge"]', ("stack", "channels"))
    channels = tuple(dict.fromkeys(base.channels + tuple(added_channels)))
    try:
        return StackSpec.model_validate(
            {
                **fields_of(base),
                "name": stack.get("name", base.name),
                "channels": channels,
                "dependencies": fields_of(base.dependencies) + added,
                "pypi_dependencies": fields_of(base.pypi_dependencies) + added_pypi,
                "image": _image(document.get("image"), locator) or fields_of(base.image),
                "extends": where,
                "override": stack.get("override", False),
            }
        )
    except ValidationError as exc:
        raise locator.from_validation(exc, ("stack",), _HINT_KEYS["stack"]) from None


def _team_stack_on_lock(document: dict[str, object], locator: "Locator", base: records.LockBase) -> StackSpec:
    """A team stack on a lock (an adopted Python environment): the lock's target, platforms and Python; the
    team's PyPI dependencies and options. The target's hardware is the lock's, or `[targets.NAME]` states it
    (a pinned lock records none)."""
    where = _table(document, "stack", locator)["extends"]  # a text: `extends_of` found it so

    def refused(key: str) -> None:
        if key in ("exclude-newer", "unknown-releases"):
            raise locator.error(
                f"`{key}` is not a [stack] key of a team stack on a lock",
                "set the team's PyPI cut-off as [pypi-options] exclude-newer",
                ("stack", key),
            )
        if key in _INHERITED_KEYS or key == "channels":
            raise locator.error(f"`{key}` comes from the base lock ({where})", "remove it here", ("stack", key))

    stack = _stack_table(document, locator, refused)
    if "dependencies" in document:
        raise locator.error(
            "a team stack on a lock adds PyPI packages only", "move them to [pypi-dependencies]", ("dependencies",)
        )
    pypi = document.get("pypi-dependencies")
    if not isinstance(pypi, dict) or not pypi:
        raise locator.error(
            "the team stack adds no dependencies", "add [pypi-dependencies] on top of the base lock", ()
        )
    added = tuple(_pypi_dependency(n, v, locator) for n, v in pypi.items())
    targets = document.get("targets")
    if targets is not None and (not isinstance(targets, dict) or set(targets) != {base.target}):
        raise locator.error(
            f"the base lock is of target `{base.target}`: a team stack on it has that one target",
            f"state it as [targets.{base.target}], or leave [targets] out",
            ("targets",),
        )
    if targets is not None and isinstance(targets[base.target], dict) and "platforms" in targets[base.target]:
        raise locator.error(
            f"the platforms of target `{base.target}` are the base lock's ({', '.join(base.platforms)})",
            "remove `platforms` here",
            ("targets", base.target, "platforms"),
        )
    if targets is not None:
        target = _target(base.target, targets[base.target], locator)
    elif base.facts.get("arch"):
        target = _target(base.target, dict(base.facts), locator)
    else:
        raise locator.error(
            f"the base lock {where} records no hardware for its target `{base.target}`",
            f'state it: [targets.{base.target}] with arch = "sm90" and driver = "...", or arch = "cpu"',
            (),
        )
    try:
        return StackSpec.model_validate(
            {
                "name": stack.get("name", base.target),
                "platforms": base.platforms,
                "python": base.python,
                "pypi_dependencies": added,
                "pypi_options": _pypi_options(document.get("pypi-options"), locator),
                "targets": (target,),
                "image": _image(document.get("image"), locator),
                "extends": where,
                "override": stack.get("override", False),
            }
        )
    except ValidationError as exc:
        raise locator.from_validation(exc, ("stack",), _HINT_KEYS["stack"]) from None


def _table(document: dict[str, object], key: str, locator: "Locator") -> dict[str, object]:
    value = document.get(key)
    if value is None:
        raise locator.error(f"missing [{key}] table", f"add a [{key}] table (see docs/guide/stacks.md)", ())
    if not isinstance(value, dict):
        raise locator.error(f"`{key}` must be a table", f"write it as [{key}]", (key,))
    return value


def _dependency(name: str, value: Any, locator: Locator) -> Dependency:
    where = ("dependencies", name)
    if isinstance(value, str):
        spec = value.strip()
        spec = "" if spec == "*" else spec
    elif isinstance(value, dict):
        unknown = [k for k in value if k not in _DEP_TABLE_KEYS]
        if unknown:
            raise locator.error(f"unknown key `{unknown[0]}` in dependency `{name}`", _HINT_KEYS["dependency"], where)
        version = str(value.get("version", "*")).strip() or "*"
        build = str(value.get("build", "")).strip()
        spec = f"{version} {build}".strip() if build else ("" if version == "*" else version)
    else:
        raise locator.error(f"dependency `{name}` must be a string or a table", _HINT_KEYS["dependency"], where)
    if re.search(r"[\[\]\"';]", spec):
        raise locator.error(
            f"dependency `{name}` has an unsupported match spec `{spec}`", _HINT_KEYS["dependency"], where
        )
    try:
        return Dependency(name=name, spec=spec)
    except ValidationError as exc:
        raise locator.from_validation(exc, where, _HINT_KEYS["dependency"]) from None


def _pypi_dependency(name: str, value: Any, locator: Locator) -> PypiDependency:
    where = ("pypi-dependencies", name)
    fields: dict[str, object] = {"name": name}
    if isinstance(value, str):
        fields["specifier"] = value
    elif isinstance(value, dict):
        unknown = [k for k in value if k not in _PYPI_TABLE_KEYS]
        if unknown:
            raise locator.error(f"unknown key `{unknown[0]}` in PyPI dependency `{name}`", _HINT_KEYS["pypi"], where)
        fields["specifier"] = str(value.get("version", ""))
        fields["extras"] = tuple(value.get("extras", ()))
        fields["index"] = value.get("index")
        fields["path"] = value.get("path")
        fields["editable"] = value.get("editable", False)
    else:
        raise locator.error(f"PyPI dependency `{name}` must be a string or a table", _HINT_KEYS["pypi"], where)
    try:
        return PypiDependency(**fields)
    except ValidationError as exc:
        raise locator.from_validation(exc, where, _HINT_KEYS["pypi"]) from None


def _pypi_options(value: Any, locator: Locator) -> PypiOptions:
    if value is None:
        return PypiOptions()
    if not isinstance(value, dict):
        raise locator.error("`pypi-options` must be a table", "write it as [pypi-options]", ("pypi-options",))
    for key in value:
        if key not in _PYPI_OPTION_KEYS:
            raise locator.error(
                f"unknown key `{key}` in [pypi-options]", _HINT_KEYS["pypi-options"], ("pypi-options", key)
            )
    fields = dict(value)
    if "exclude-newer" in fields:
        fields["exclude-newer"] = _exclude_newer(fields["exclude-newer"], locator, ("pypi-options", "exclude-newer"))
    try:
        return PypiOptions(**fields)
    except ValidationError as exc:
        raise locator.from_validation(exc, ("pypi-options",), _HINT_KEYS["pypi-options"]) from None


def _image(value: Any, locator: Locator) -> ImageSettings | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise locator.error("`image` must be a table", "write it as [image]", ("image",))
    for key in value:
        if key not in _IMAGE_KEYS:
            raise locator.error(f"unknown key `{key}` in [image]", _HINT_KEYS["image"], ("image", key))
    try:
        return ImageSettings(**value)
    except ValidationError as exc:
        raise locator.from_validation(exc, ("image",), _HINT_KEYS["image"]) from None


def _target(name: str, value: Any, locator: Locator) -> Target:
    if not isinstance(value, dict):
        raise locator.error(
            f"target `{name}` must be a table", "write it as [targets.NAME] with `arch = ...`", ("targets", name)
        )
    known = set(Target.model_fields) | {f.alias for f in Target.model_fields.values() if f.alias}
    for key in value:
        if key not in known or key == "name" or ("_" in key and key.replace("_", "-") in known):
            raise locator.error(f"unknown key `{key}` in target `{name}`", _HINT_KEYS["target"], ("targets", name, key))
    if "arch" not in value:
        raise locator.error(
            f"target `{name}` has no `arch`",
            'set `arch = "sm90"` (or "cpu"); `lockgen arch` lists them',
            ("targets", name),
        )
    try:
        return Target(name=name, **value)
    except ValidationError as exc:
        field = next((str(p) for p in exc.errors()[0]["loc"] if isinstance(p, str)), "")
        hint = {
            "arch": _arch_hint(value.get("arch")),
            "driver": 'write the full version `nvidia-smi` prints, e.g. driver = "550.54.15"',
        }.get(field, _HINT_KEYS["target"])
        raise locator.from_validation(exc, ("targets", name), hint) from None


def _arch_hint(value: Any) -> str:
    """For an arch written as a GPU's name (`H100`, `a100`), the arch that GPU is."""
    from lockgen.core.gpu.facts import load_facts

    text = str(value).strip().lower()
    for arch in load_facts().archs.values() if text else ():
        if any(re.search(rf"(^|[\s(]){re.escape(text)}($|[\s)-])", gpu.lower()) for gpu in arch.gpus):
            return f'{value} is {arch.name}: write arch = "{arch.name}"'
    return 'write arch = "sm90" (or "cpu"); `lockgen arch` lists the archs and their GPUs'


def _exclude_newer(value: Any, locator: Locator, where: tuple[str, ...]) -> dt.date | dt.datetime | None:
    parsed = value if value is None or isinstance(value, (dt.date, dt.datetime)) else None
    if isinstance(value, str):
        try:
            parsed = dt.datetime.fromisoformat(value) if "T" in value else dt.date.fromisoformat(value)
        except ValueError:
            pass
    if isinstance(parsed, dt.datetime) and parsed.tzinfo is not None:
        # the solvers take it in UTC: 9999-12-31T23:59:59-23:59 is past the last year a date holds (uv said only "try
        # '--help'")
        try:
            parsed.astimezone(dt.timezone.utc)
        except OverflowError:
            parsed = None
    if parsed is None and value is not None:
        raise locator.error(
            f"exclude-newer `{value}` is not a date", 'write a date like "2026-06-01" or an RFC 3339 time', where
        )
    return parsed
