"""What a command asks of a use case, as values: the environment a command names (a prefix, an
interpreter, an image), built once by the CLI from its flags, so the one-of rule is checked once there
and a use case takes one of three shapes instead of three optional arguments; and the rule a time limit a
command is given must meet (`is_time_limit`), which the fast path and the typer command both apply."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # a type only: a repeated check of a prefix would otherwise import pydantic for it
    from lockgen.model.base_image import RegistryBase


@dataclass(frozen=True)
class Prefix:
    """An environment's folder, always absolute: a package's placeholders are replaced by the prefix it was
    installed at, so a check of `--prefix env` must compare against `/abs/env`, not against `env`."""

    path: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", _absolute(self.path))


@dataclass(frozen=True)
class Python:
    """An interpreter, whose environment is meant."""

    interpreter: str


@dataclass(frozen=True)
class Image:
    """The environment inside an image: an OCI layout folder or `docker://REF`; `insecure` for a plain-HTTP or
    self-signed registry; `prefix` where in it the environment is (None: the one its config runs)."""

    source: str
    insecure: bool = False
    prefix: str | None = None


CheckTarget = Prefix | Python | Image  # what `lockgen check` checks
Environment = Prefix | Python | Image  # what `lockgen verify` certifies


@dataclass(frozen=True)
class CheckRequest:
    """`lockgen check`: the environment, and with `lock` the lock it must be (conformance; `manifests` a bundle
    to take the packages' manifests from, `platform` which of the lock's, `allow_foreign` files accepted by
    name); without, its drift from what it recorded. `full` re-hashes every file."""

    target: CheckTarget
    lock: Path | None = None
    manifests: Path | None = None
    platform: str | None = None
    allow_foreign: tuple[str, ...] = ()
    full: bool = False


@dataclass(frozen=True)
class Layering:
    """How an export's new layers are cut and packed: one per package up to `budget`, then grouped;
    `compression` (gzip or zstd) at `level`."""

    budget: int = 100
    compression: str = "gzip"
    level: int = 1


@dataclass(frozen=True)
class FromLock:
    """The lock's environment, built: of `platforms` (none: this host's); `index` writes one image per platform
    (every one the lock locks when `platforms` is empty) under one image index."""

    platforms: tuple[str, ...] = ()
    index: bool = False


@dataclass(frozen=True)
class FromPrefix:
    """An existing environment on disk, which must conform to the lock: at `image_prefix` in the image (None:
    its own path); `manifests` a bundle to prove it with; `allow_foreign` files accepted by name."""

    path: Path
    manifests: Path | None = None
    image_prefix: str | None = None
    allow_foreign: tuple[str, ...] = ()

    def __post_init__(self) -> None:  # absolute, as `Prefix` is: its placeholders and launchers name the absolute path
        object.__setattr__(self, "path", _absolute(self.path))


@dataclass(frozen=True)
class FromImage:
    """A vendor's image (a layout or `docker://REF`; the export's `base` is the same image, read shallow) whose
    environment, at `image_prefix` (None: its label, else /opt/env), must conform to the lock."""

    source: str
    insecure: bool = False
    manifests: Path | None = None
    image_prefix: str | None = None
    allow_foreign: tuple[str, ...] = ()


@dataclass(frozen=True)
class ExportRequest:
    """`lockgen export`: the lock, where its image goes (`out`, in `fmt`: oci-layout, oci-archive or
    docker-archive), what its environment comes from, the base image under it (a layout `Path` or a
    `RegistryBase`; for `FromImage` the vendor's image itself), the tag, and how new layers are made."""

    lock: Path
    out: Path
    source: FromLock | FromPrefix | FromImage = FromLock()
    base: Path | RegistryBase | None = None
    tag: str | None = None
    layering: Layering = Layering()
    fmt: str = "oci-layout"


def is_time_limit(seconds: float) -> bool:
    """Whether `seconds` (`verify --timeout`) can limit a kernel run: above 0 (at 0 or less the kernel would be
    killed as it starts) and at most the longest wait a thread can make (`threading.TIMEOUT_MAX`, which the
    kernel's wait is; `inf` overflows it); NaN is neither."""
    return 0 < seconds <= threading.TIMEOUT_MAX


def _absolute(path: Path) -> Path:
    """`path` made absolute against the working folder; as given where that folder is gone (it was removed
    under the shell), so the use case says the environment is not there instead of failing on `getcwd`."""
    try:
        return Path(path).absolute()
    except FileNotFoundError:
        return Path(path)


@dataclass(frozen=True)
class StackEditRequest:
    """`lockgen add` and `lockgen remove`: the stack, the packages as the command line writes them, the table
    an addition goes to (`dependencies` for conda, `pypi-dependencies`; None: the one the stack file uses),
    the targets re-locked (none: every target) and resolve's own flags (`--channel-alias`, `--insecure`)."""

    stack: Path
    packages: tuple[str, ...]
    table: Literal["dependencies", "pypi-dependencies"] | None = None
    targets: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    insecure: bool = False


@dataclass(frozen=True)
class ImportOptions:
    """What `lockgen import` is told beside the file and the target. Each option belongs to the formats that take
    it (`adapters/foreign`: the pixi environment; the Python, extras, groups, root, pyproject, glibc of a uv.lock;
    some of those for a pylock.toml); one given to a format that does not take it is refused, naming its flag.
    The defaults are what each tool does untold (uv's `dev` group in)."""

    environment: str | None = field(default=None, metadata={"flag": "--environment"})
    python: str | None = field(default=None, metadata={"flag": "--python"})
    extras: tuple[str, ...] = field(default=(), metadata={"flag": "--extra"})
    all_extras: bool = field(default=False, metadata={"flag": "--all-extras"})
    groups: tuple[str, ...] = field(default=(), metadata={"flag": "--group"})
    dev: bool = field(default=True, metadata={"flag": "--no-dev"})
    no_default_groups: bool = field(default=False, metadata={"flag": "--no-default-groups"})
    all_groups: bool = field(default=False, metadata={"flag": "--all-groups"})
    only_groups: tuple[str, ...] = field(default=(), metadata={"flag": "--only-group"})
    no_groups: tuple[str, ...] = field(default=(), metadata={"flag": "--no-group"})
    package: str | None = field(default=None, metadata={"flag": "--package"})
    all_packages: bool = field(default=False, metadata={"flag": "--all-packages"})
    project: Path | None = field(default=None, metadata={"flag": "--project"})
    glibc: str = field(default="2.28", metadata={"flag": "--glibc"})
    allow_partial: bool = field(default=False, metadata={"flag": "--allow-partial"})
    stated: frozenset[str] = frozenset()  # the options the command line gave, by name, even at their default value

    def given(self) -> dict[str, str]:
        """The options the import was told, each with its flag: those the command line gave (`--glibc 2.28` is
        told, though it is the default) and those set away from their defaults."""
        return {
            option.name: str(option.metadata["flag"])
            for option in fields(self)
            if "flag" in option.metadata
            and (option.name in self.stated or getattr(self, option.name) != option.default)
        }

    @staticmethod
    def flag(option: str) -> str:
        """The flag that sets `option` (a field's name)."""
        return next(str(each.metadata["flag"]) for each in fields(ImportOptions) if each.name == option)
