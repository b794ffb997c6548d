"""The stack specification (`stack.toml`) as frozen models."""

from __future__ import annotations

import datetime as dt
import re
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from lockgen.model.base import Frozen
from lockgen.model.checked import DriverVersion, GlibcVersion
from lockgen.model.names import CONTROL, normalize, normalize_arch, shown

SUPPORTED_PLATFORMS = ("linux-64", "linux-aarch64")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_MAJOR_MINOR = re.compile(r"^\d+\.\d+$")


class Dependency(Frozen):
    """One conda dependency: a package name and a match-spec text without the name."""

    name: str
    spec: str = ""

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        if not _NAME.fullmatch(value):
            raise ValueError(f"`{value}` is not a valid conda package name")
        return value.lower()

    @field_validator("spec")
    @classmethod
    def _one_line(cls, value: str) -> str:
        if CONTROL.search(value):  # rattler reads `3.11.*\nnumpy` as `3.11.* numpy`
            raise ValueError(f"the match spec `{shown(value, 80)}` holds a control character (a newline, a tab)")
        return value

    def match_spec(self) -> str:
        """The full match spec, e.g. `pytorch 2.6.* cuda*`."""
        return f"{self.name} {self.spec}".strip()


class PypiDependency(Frozen):
    """One PyPI requirement: a project name, its PEP 508 specifier and extras, optionally its own index; or a local
    package (`path`, a folder with a pyproject.toml below the stack's folder, installed `editable` or built)."""

    name: str
    specifier: str = ""
    extras: tuple[str, ...] = ()
    index: str | None = None
    path: str | None = None
    editable: bool = False

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        if not re.fullmatch(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$", value):
            raise ValueError(f"`{value}` is not a valid PyPI project name")
        return normalize(value)

    @field_validator("specifier")
    @classmethod
    def _valid_specifier(cls, value: str) -> str:
        value = value.strip()
        if value in ("", "*"):
            return ""
        for clause in value.split(","):
            if not re.fullmatch(r"^\s*(===|==|!=|~=|<=|>=|<|>)\s*[A-Za-z0-9.*+!_-]+\s*$", clause):
                raise ValueError(f'`{value}` is not a PEP 440 version specifier (e.g. ">=2.4,<2.8")')
        return value.replace(" ", "")

    @field_validator("index")
    @classmethod
    def _own_index(cls, value: str | None) -> str | None:
        return _index_url(value, "the index") if value is not None else None

    @field_validator("path")
    @classmethod
    def _below_the_stack(cls, value: str | None) -> str | None:
        return local_path(value) if value is not None else None

    @model_validator(mode="after")
    def _local_or_published(self) -> PypiDependency:
        if self.path is None and self.editable:
            raise ValueError("`editable` needs a `path` (a local package's folder)")
        if self.path is not None and (self.specifier or self.index):
            raise ValueError("a local package (`path`) takes no `version` or `index`: its folder is the source")
        if self.path == "." and not self.editable:  # its source tree holds the locks made from it: never the same twice
            raise ValueError(
                'the stack\'s own folder (`path = "."`) is installed `editable = true` (a built one would pin a '
                "tree holding its own lock)"
            )
        return self

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
_VARIANT = re.compile(r"^(cpu|cu\d{3})$")  # the PyTorch variants a stack may take from their own index
_INDEX_URL = re.compile(r"^(https?|file)://[^\s]+$")


def _index_url(url: str, what: str) -> str:
    """`url` when it is an index's (http, https or file, no whitespace or control character), else the refusal
    naming `what`: every index a stack names reaches uv's input."""
    if not _INDEX_URL.fullmatch(url):
        raise ValueError(f"{what} `{shown(url, 80)}` must be an http(s) or file URL, without whitespace")
    return url


class PypiOptions(Frozen):
    """How PyPI packages are resolved: indexes, a date cut-off, wheels only, and where torch may come from
    besides the index: `torch-indexes` (each PyTorch variant's index: `cpu` is where a CPU target's torch comes
    from; a CUDA variant such as `cu126` is a source every GPU target weighs against PyPI), `torch-variants`
    (CUDA variants taken from PyTorch's own indexes without writing their URLs) and `torch-mirror` (a prefix
    that replaces `https://download.pytorch.org/whl` in every torch index, the defaults included)."""

    index_url: str = Field("https://pypi.org/simple", alias="index-url")
    extra_index_urls: tuple[str, ...] = Field((), alias="extra-index-urls")
    exclude_newer: dt.date | dt.datetime | None = Field(None, alias="exclude-newer")
    no_build: bool = Field(True, alias="no-build")
    torch_indexes: dict[str, str] = Field({}, alias="torch-indexes")
    torch_variants: tuple[str, ...] = Field((), alias="torch-variants")
    torch_mirror: str | None = Field(None, alias="torch-mirror")

    @field_validator("index_url")
    @classmethod
    def _main_index(cls, value: str) -> str:
        return _index_url(value, "index-url")

    @field_validator("extra_index_urls")
    @classmethod
    def _extra_indexes(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(_index_url(url, "extra-index-urls:") for url in value)

    @field_validator("torch_indexes")
    @classmethod
    def _known_variants(cls, value: dict[str, str]) -> dict[str, str]:
        for variant, url in value.items():
            if not _VARIANT.fullmatch(variant):
                raise ValueError(
                    f"`{variant}` is not a variant lockgen takes from its own index (`cpu` or a CUDA variant "
                    "such as `cu126`)"
                )
            _index_url(url, f"the `{variant}` index")
        return value

    @field_validator("torch_variants")
    @classmethod
    def _cuda_variants(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for variant in value:
            if not re.fullmatch(r"^cu\d{3}$", variant):
                raise ValueError(f"torch-variants: `{variant}` is not a CUDA variant such as `cu126`")
        if len(set(value)) != len(value):
            raise ValueError("torch-variants names a variant twice")
        return value

    @field_validator("torch_mirror")
    @classmethod
    def _mirror_url(cls, value: str | None) -> str | None:
        return _index_url(value, "torch-mirror").rstrip("/") if value is not None else value

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


class Target(Frozen):
    """One GPU target of the fleet: what hardware and driver the lock is for."""

    name: str
    arch: str
    driver: DriverVersion | None = None
    platforms: tuple[str, ...] | None = None
    glibc: GlibcVersion = "2.28"
    cuda: str | None = None
    cuda_compat: Literal["strict", "minor"] = Field("strict", alias="cuda-compat")
    allow_ptx_jit: bool = Field(False, alias="allow-ptx-jit")

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        if not _NAME.fullmatch(value):
            raise ValueError(f"target name `{value}` must be letters, digits, `.`, `_` or `-`")
        return value

    @field_validator("arch")
    @classmethod
    def _valid_arch(cls, value: str) -> str:
        value = normalize_arch(value)
        if value != "cpu" and not re.fullmatch(r"^sm\d{2,3}$", value):
            raise ValueError(f"arch `{value}` must look like `sm90` or be `cpu`")
        return value

    @field_validator("driver", "cuda", "allow_ptx_jit")
    @classmethod
    def _gpu_only(cls, value: object, info: ValidationInfo) -> object:
        if info.data.get("arch") == "cpu" and value:
            raise ValueError(f"a `cpu` target takes no `{(info.field_name or '').replace('_', '-')}`")
        return value

    @field_validator("cuda")
    @classmethod
    def _valid_cuda(cls, value: str | None) -> str | None:
        if value is not None and not _MAJOR_MINOR.fullmatch(value):
            raise ValueError(f"cuda `{value}` must be a CUDA major.minor like `12.4`")
        return value

    @field_validator("platforms")
    @classmethod
    def _valid_platforms(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is not None:
            _check_platforms(value)
        return value

    @model_validator(mode="after")
    def _gpu_needs_driver(self) -> "Target":
        if self.arch != "cpu" and self.driver is None:
            raise ValueError(f"GPU target `{self.name}` needs `driver`, the fleet's NVIDIA driver version")
        return self

    @property
    def is_gpu(self) -> bool:
        return self.arch != "cpu"


def _check_platforms(value: tuple[str, ...]) -> None:
    if not value:
        raise ValueError("platforms must name at least one platform")
    for platform in value:
        if platform not in SUPPORTED_PLATFORMS:
            raise ValueError(f"platform `{platform}` is not supported; use one of {', '.join(SUPPORTED_PLATFORMS)}")
    if len(set(value)) != len(value):
        raise ValueError("platforms are listed twice")


_PORT = re.compile(r"^(\d{1,5})(/(tcp|udp|sctp))?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_USER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*(:[A-Za-z0-9_][A-Za-z0-9_.-]*)?$")
_SERVICE_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")
RESERVED_ENV = ("PATH", "CONDA_PREFIX")  # the environment's own: lockgen sets them
RESERVED_LABEL_PREFIX = "dev.lockgen."  # the labels that bind an image to its lock and environment


class ImageSettings(Frozen):
    """`[image]` in stack.toml: what an exported image runs and exposes (the OCI config's fields). `services`
    (name -> command) are several long-running programs one image runs: export makes the image's entrypoint
    lockgen's service launcher (`lockgen/data/service_launcher.py`), so it states no entrypoint or cmd."""

    entrypoint: tuple[str, ...] | None = None
    cmd: tuple[str, ...] | None = None
    env: dict[str, str] = {}
    workdir: str | None = None
    user: str = "1000:1000"
    exposed_ports: tuple[str, ...] = Field((), alias="exposed-ports")
    labels: dict[str, str] = {}
    volumes: tuple[str, ...] = ()
    services: dict[str, tuple[str, ...]] = {}

    @field_validator("services")
    @classmethod
    def _service_commands(cls, value: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        for name, command in value.items():
            if not _SERVICE_NAME.fullmatch(name):
                raise ValueError(
                    f'service name `{name}` must be lower-case letters, digits, `-` and `_` (e.g. "jupyter")'
                )
            if not command or not command[0]:
                raise ValueError(f'service `{name}` needs a command: a list such as ["jupyter", "lab"]')
        return dict(sorted(value.items()))

    @model_validator(mode="after")
    def _services_are_the_entrypoint(self) -> "ImageSettings":
        if self.services and (self.entrypoint is not None or self.cmd is not None):
            raise ValueError(
                "`services` and `entrypoint`/`cmd` both say what the image runs: with services the entrypoint is "
                "lockgen's service launcher; state one of them"
            )
        return self

    @field_validator("workdir")
    @classmethod
    def _absolute_workdir(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("/"):
            raise ValueError(f'workdir `{value}` must be an absolute path such as "/home/user"')
        return value

    @field_validator("volumes")
    @classmethod
    def _absolute_volumes(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for path in value:
            if not path.startswith("/") or "\0" in path:
                raise ValueError(f'volume `{path}` must be an absolute path such as "/data"')
        return tuple(sorted(set(value)))

    @field_validator("exposed_ports", mode="before")
    @classmethod
    def _ports(cls, value: object) -> object:
        if not isinstance(value, (list, tuple)):
            return value
        ports = []
        for port in value:
            found = _PORT.fullmatch(str(port)) if isinstance(port, (str, int)) and not isinstance(port, bool) else None
            if found is None or not 0 < int(found.group(1)) < 65536:
                raise ValueError(
                    f'exposed port `{port}` must be PORT or PORT/tcp|udp|sctp, 1 to 65535 (e.g. 8888 or "22/tcp")'
                )
            ports.append(f"{int(found.group(1))}/{found.group(3) or 'tcp'}")
        return tuple(sorted(set(ports)))

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not _ENV_NAME.fullmatch(name):
                raise ValueError(f"env name `{name}` must be letters, digits and `_`, not starting with a digit")
            if name in RESERVED_ENV:
                raise ValueError(f"env `{name}` is the environment's own (lockgen sets it); choose another name")
        return value

    @field_validator("labels")
    @classmethod
    def _label_names(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if name.startswith(RESERVED_LABEL_PREFIX):
                raise ValueError(
                    f"label `{name}` is lockgen's: `{RESERVED_LABEL_PREFIX}*` labels bind an image to its lock"
                )
        return value

    @field_validator("user")
    @classmethod
    def _user(cls, value: str) -> str:
        if not _USER.fullmatch(value):
            raise ValueError(f'user `{value}` must be USER, UID or UID:GID (e.g. "1000:1000")')
        if value.split(":")[0] in ("0", "root"):
            raise ValueError("the image's user must not be root: lockgen's images run as a non-root user")
        return value


class LockBase(Frozen):
    """A team stack's base that is a lock, not a stack (`extends = "../vendor/locks/node.conda-lock.yml"`): one
    `lockgen pin` made of a vendor image's or a node's Python, say. What the team stack takes from it: its one
    target, its platforms and Python, and the target's hardware as the lock records it (a pinned lock records
    none: the team stack states its `[targets.NAME]`)."""

    target: str
    platforms: tuple[str, ...]
    python: str | None = None
    facts: dict[str, str] = {}  # arch, driver, glibc, cuda, as the lock's `lockgen.*` keys have them


class StackSpec(Frozen):
    """A whole `stack.toml`: channels, dependencies and the fleet's targets."""

    name: str
    channels: tuple[str, ...] = ()
    platforms: tuple[str, ...] = ("linux-64",)
    exclude_newer: dt.date | dt.datetime | None = Field(None, alias="exclude-newer")
    python: str | None = None
    unknown_releases: Literal["infer", "refuse"] = Field(
        "infer", alias="unknown-releases"
    )  # torch releases the facts lack
    dependencies: tuple[Dependency, ...] = ()
    pypi_dependencies: tuple[PypiDependency, ...] = ()
    pypi_options: PypiOptions = Field(default_factory=PypiOptions)  # made when wanted: importing builds no validator
    targets: tuple[Target, ...]
    image: ImageSettings | None = None
    extends: str | None = None  # a base stack.toml or lock (relative to this one): its locks' packages are held
    override: bool = False  # with extends: the team's dependencies may move base packages (the lock says which)

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        if not _NAME.fullmatch(value):
            raise ValueError(f"stack name `{value}` must be letters, digits, `.`, `_` or `-`")
        return value

    @field_validator("python")
    @classmethod
    def _valid_python(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"^3\.\d+(\.\d+)?$", value):
            raise ValueError(
                f'python `{value}` must be a major.minor such as "3.11" (any 3.11.x), or an exact version such '
                'as "3.11.9"'
            )
        return value

    @model_validator(mode="after")
    def _something_to_lock(self) -> "StackSpec":
        if not self.dependencies and not self.pypi_dependencies:
            raise ValueError("the stack has no [dependencies] and no [pypi-dependencies]")
        if self.dependencies and not self.channels:
            raise ValueError("channels must name at least one channel for [dependencies]")
        if not self.dependencies and self.python is None:
            raise ValueError('a pure-PyPI stack needs `python = "3.11"` (no conda python decides it)')
        if self.dependencies and self.python_exact:
            raise ValueError(
                f"python `{self.python}` pins the interpreter of a pure-PyPI stack; a stack with [dependencies] "
                f'pins its conda python there (python = "{self.python}")'
            )
        return self

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

    @field_validator("platforms")
    @classmethod
    def _valid_platforms(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        _check_platforms(value)
        return value

    def platforms_of(self, target: Target) -> tuple[str, ...]:
        """The platforms a target is locked for: its own, else the stack's."""
        return target.platforms or self.platforms

    def target(self, name: str) -> Target:
        for target in self.targets:
            if target.name == name:
                return target
        raise KeyError(name)
