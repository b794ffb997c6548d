"""The stack specification (`stack.toml`) as plain frozen records.

A stack's tables are validated once, where its text is first read (`core/stack/spec_parse.py`, by the pydantic
models of `core/stack/spec_models.py`, which hold every rule and error message); past that boundary a stack is these
records, which import nothing, so a resolve of a stack whose checked value is kept (`kept_inputs.kept_spec`) loads
no validator. A field's name in `stack.toml`, where it differs, is its `alias` (`dataclasses.field` metadata).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Literal

from lockgen.model.names import CONTROL, shown

SUPPORTED_PLATFORMS = ("linux-64", "linux-aarch64")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")  # a stack's and a target's name
MAJOR_MINOR = re.compile(r"^\d+\.\d+$")


def _alias(name: str) -> dict[str, str]:
    return {"alias": name}


@dataclass(frozen=True, slots=True, kw_only=True)
class Dependency:
    """One conda dependency: a package name and a match-spec text without the name."""

    name: str
    spec: str = ""

    def match_spec(self) -> str:
        """The full match spec, e.g. `pytorch 2.6.* cuda*`."""
        return f"{self.name} {self.spec}".strip()


@dataclass(frozen=True, slots=True, kw_only=True)
class PypiDependency:
    """One PyPI requirement: a project name, its PEP 508 specifier and extras, optionally its own index; or a local
    package (`path`, a folder with a pyproject.toml below the stack's folder, installed `editable` or built)."""

    name: str
    specifier: str = ""
    extras: tuple[str, ...] = ()
    index: str | None = None
    path: str | None = None
    editable: bool = False

    @property
    def is_local(self) -> bool:
        return self.path is not None

    def requirement(self) -> str:  # a local package's by name: the uv adapter adds its folder
        extras = f"[{','.join(self.extras)}]" if self.extras else ""
        return f"{self.name}{extras}{self.specifier}"


def local_path(value: str) -> str:
    """A local package's folder, normalized (`./pkg/` -> `pkg`, `.` the stack's own): relative, below the stack's
    (uv and pixi take any path; a lock travels, and names no folder of the host outside its project)."""
    if not value or CONTROL.search(value) or "\\" in value or re.search(r"\s", value):
        raise ValueError(
            f"path `{shown(value, 80)}` must be a folder below the stack's, written with `/` and without whitespace"
        )
    if value.startswith("/") or re.match(r"^[A-Za-z]:", value):
        raise ValueError(f"path `{shown(value, 80)}` is absolute: write it relative to the stack's folder")
    parts = [part for part in value.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise ValueError(f"path `{shown(value, 80)}` leaves the stack's folder: a local package lives below it")
    return "/".join(parts) or "."


PYTORCH_BASE = "https://download.pytorch.org/whl"  # PyTorch's own indexes: `<base>/cpu`, `<base>/cu126`, ...
PYTORCH_CPU_INDEX = f"{PYTORCH_BASE}/cpu"
VARIANT = re.compile(r"^(cpu|cu\d{3})$")  # the PyTorch variants a stack may take from their own index
INDEX_URL = re.compile(r"^(https?|file)://[^\s]+$")


def index_url(url: str, what: str) -> str:
    """`url` when it is an index's (http, https or file, no whitespace or control character), else the refusal
    naming `what`: every index a stack names reaches uv's input."""
    if not INDEX_URL.fullmatch(url):
        raise ValueError(f"{what} `{shown(url, 80)}` must be an http(s) or file URL, without whitespace")
    return url


@dataclass(frozen=True, slots=True, kw_only=True)
class PypiOptions:
    """How PyPI packages are resolved: indexes, a date cut-off, wheels only, and where torch may come from
    besides the index: `torch-indexes` (each PyTorch variant's index: `cpu` is where a CPU target's torch comes
    from; a CUDA variant such as `cu126` is a source every GPU target weighs against PyPI), `torch-variants`
    (CUDA variants taken from PyTorch's own indexes without writing their URLs) and `torch-mirror` (a prefix
    that replaces `https://download.pytorch.org/whl` in every torch index, the defaults included)."""

    index_url: str = field(default="https://pypi.org/simple", metadata=_alias("index-url"))
    extra_index_urls: tuple[str, ...] = field(default=(), metadata=_alias("extra-index-urls"))
    exclude_newer: dt.date | dt.datetime | None = field(default=None, metadata=_alias("exclude-newer"))
    no_build: bool = field(default=True, metadata=_alias("no-build"))
    torch_indexes: dict[str, str] = field(default_factory=dict, metadata=_alias("torch-indexes"))
    torch_variants: tuple[str, ...] = field(default=(), metadata=_alias("torch-variants"))
    torch_mirror: str | None = field(default=None, metadata=_alias("torch-mirror"))

    def torch_index(self, variant: str) -> str:
        """A variant's index: the stack's `torch-indexes.<variant>`, else PyTorch's own; with `torch-mirror`,
        PyTorch's base is replaced by the mirror's."""
        url = self.torch_indexes.get(variant, f"{PYTORCH_BASE}/{variant}")
        if self.torch_mirror and (url == PYTORCH_BASE or url.startswith(PYTORCH_BASE + "/")):
            return self.torch_mirror + url[len(PYTORCH_BASE) :]
        return url

    def cpu_torch_index(self) -> str:
        """The index a CPU target's torch comes from."""
        return self.torch_index("cpu")

    def gpu_torch_sources(self) -> tuple[tuple[str, str], ...]:
        """(variant, index) of every CUDA variant a GPU target may take torch from besides the stack's index."""
        variants = sorted(set(self.torch_variants) | {v for v in self.torch_indexes if v != "cpu"})
        return tuple((variant, self.torch_index(variant)) for variant in variants)


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """One GPU target of the fleet: what hardware and driver the lock is for."""

    name: str
    arch: str
    driver: str | None = None  # the rules: `model.checked.DriverVersion`, at the boundary
    platforms: tuple[str, ...] | None = None
    glibc: str = "2.28"  # `model.checked.GlibcVersion`
    cuda: str | None = None
    cuda_compat: Literal["strict", "minor"] = field(default="strict", metadata=_alias("cuda-compat"))
    allow_ptx_jit: bool = field(default=False, metadata=_alias("allow-ptx-jit"))

    @property
    def is_gpu(self) -> bool:
        return self.arch != "cpu"


def check_platforms(value: tuple[str, ...]) -> None:
    if not value:
        raise ValueError("platforms must name at least one platform")
    for platform in value:
        if platform not in SUPPORTED_PLATFORMS:
            raise ValueError(f"platform `{platform}` is not supported; use one of {', '.join(SUPPORTED_PLATFORMS)}")
    if len(set(value)) != len(value):
        raise ValueError("platforms are listed twice")


RESERVED_ENV = ("PATH", "CONDA_PREFIX")  # the environment's own: lockgen sets them
RESERVED_LABEL_PREFIX = "dev.lockgen."  # the labels that bind an image to its lock and environment


@dataclass(frozen=True, slots=True, kw_only=True)
class ImageSettings:
    """`[image]` in stack.toml: what an exported image runs and exposes (the OCI config's fields). `services`
    (name -> command) are several long-running programs one image runs: export makes the image's entrypoint
    lockgen's service launcher (`lockgen/data/service_launcher.py`), so it states no entrypoint or cmd."""

    entrypoint: tuple[str, ...] | None = None
    cmd: tuple[str, ...] | None = None
    env: dict[str, str] = field(default_factory=dict)
    workdir: str | None = None
    user: str = "1000:1000"
    exposed_ports: tuple[str, ...] = field(default=(), metadata=_alias("exposed-ports"))
    labels: dict[str, str] = field(default_factory=dict)
    volumes: tuple[str, ...] = ()
    services: dict[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class LockBase:
    """A team stack's base that is a lock, not a stack (`extends = "../vendor/locks/node.conda-lock.yml"`): one
    `lockgen pin` made of a vendor image's or a node's Python, say. What the team stack takes from it: its one
    target, its platforms and Python, and the target's hardware as the lock records it (a pinned lock records
    none: the team stack states its `[targets.NAME]`)."""

    target: str
    platforms: tuple[str, ...]
    python: str | None = None
    facts: dict[str, str] = field(default_factory=dict)  # arch, driver, glibc, cuda, as the lock's `lockgen.*` keys


@dataclass(frozen=True, slots=True, kw_only=True)
class StackSpec:
    """A whole `stack.toml`: channels, dependencies and the fleet's targets."""

    name: str
    channels: tuple[str, ...] = ()
    platforms: tuple[str, ...] = ("linux-64",)
    exclude_newer: dt.date | dt.datetime | None = field(default=None, metadata=_alias("exclude-newer"))
    python: str | None = None
    unknown_releases: Literal["infer", "refuse"] = field(
        default="infer", metadata=_alias("unknown-releases")
    )  # torch releases the facts lack
    dependencies: tuple[Dependency, ...] = ()
    pypi_dependencies: tuple[PypiDependency, ...] = ()
    pypi_options: PypiOptions = field(default_factory=PypiOptions)
    targets: tuple[Target, ...]
    image: ImageSettings | None = None
    extends: str | None = None  # a base stack.toml or lock (relative to this one): its locks' packages are held
    override: bool = False  # with extends: the team's dependencies may move base packages (the lock says which)

    @property
    def python_minor(self) -> str | None:
        """The `X.Y` of `python` (what the PyPI layer resolves for), or None."""
        return ".".join(self.python.split(".")[:2]) if self.python else None

    @property
    def python_exact(self) -> str | None:
        """`python` when it names one interpreter (`3.11.9`) rather than a range (`3.11`: any 3.11.x)."""
        return self.python if self.python and self.python.count(".") == 2 else None

    @property
    def has_conda(self) -> bool:
        return bool(self.dependencies)

    @property
    def pypi_exclude_newer(self) -> dt.date | dt.datetime | None:
        """The PyPI layer's cut-off: `[pypi-options] exclude-newer`, else the stack's own `exclude-newer` (a
        pure-PyPI stack's `[stack] exclude-newer` is its PyPI cut-off)."""
        return self.pypi_options.exclude_newer or self.exclude_newer

    def platforms_of(self, target: Target) -> tuple[str, ...]:
        """The platforms a target is locked for: its own, else the stack's."""
        return target.platforms or self.platforms

    def target(self, name: str) -> Target:
        for target in self.targets:
            if target.name == name:
                return target
        raise KeyError(name)
