"""The stack's rules: pydantic models of `stack.toml`'s tables, each field's validator and its error message.

The boundary of a stack (`spec_parse`, `stack_edit`): a stack's text is validated by these models once, where it is
first read, and the value they accept is handed on as the plain records of `model/spec.py` (`plain_spec`), which
import no pydantic. The records' fields are these models' fields, by name (a test holds them alike).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import fields, is_dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationInfo, field_validator, model_validator

from lockgen.model import spec as records
from lockgen.model.base import Frozen
from lockgen.model.checked import DriverVersion, GlibcVersion
from lockgen.model.names import CONTROL, normalize, normalize_arch, shown
from lockgen.model.spec import (
    MAJOR_MINOR,
    NAME,
    RESERVED_ENV,
    RESERVED_LABEL_PREFIX,
    VARIANT,
    check_platforms,
    index_url,
    local_path,
)


class Dependency(Frozen):
    """One conda dependency: a package name and a match-spec text without the name."""

    name: str
    spec: str = ""

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        if not NAME.fullmatch(value):
            raise ValueError(f"`{value}` is not a valid conda package name")
        return value.lower()

    @field_validator("spec")
    @classmethod
    def _one_line(cls, value: str) -> str:
        if CONTROL.search(value):  # rattler reads `3.11.*\nnumpy` as `3.11.* numpy`
            raise ValueError(f"the match spec `{shown(value, 80)}` holds a control character (a newline, a tab)")
        return value


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
        return index_url(value, "the index") if value is not None else None

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
        return index_url(value, "index-url")

    @field_validator("extra_index_urls")
    @classmethod
    def _extra_indexes(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(index_url(url, "extra-index-urls:") for url in value)

    @field_validator("torch_indexes")
    @classmethod
    def _known_variants(cls, value: dict[str, str]) -> dict[str, str]:
        for variant, url in value.items():
            if not VARIANT.fullmatch(variant):
                raise ValueError(
                    f"`{variant}` is not a variant lockgen takes from its own index (`cpu` or a CUDA variant "
                    "such as `cu126`)"
                )
            index_url(url, f"the `{variant}` index")
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
        return index_url(value, "torch-mirror").rstrip("/") if value is not None else value


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
        if not NAME.fullmatch(value):
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
        if value is not None and not MAJOR_MINOR.fullmatch(value):
            raise ValueError(f"cuda `{value}` must be a CUDA major.minor like `12.4`")
        return value

    @field_validator("platforms")
    @classmethod
    def _valid_platforms(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is not None:
            check_platforms(value)
        return value

    @model_validator(mode="after")
    def _gpu_needs_driver(self) -> "Target":
        if self.arch != "cpu" and self.driver is None:
            raise ValueError(f"GPU target `{self.name}` needs `driver`, the fleet's NVIDIA driver version")
        return self


_PORT = re.compile(r"^(\d{1,5})(/(tcp|udp|sctp))?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_USER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*(:[A-Za-z0-9_][A-Za-z0-9_.-]*)?$")
_SERVICE_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")


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
        if not NAME.fullmatch(value):
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
        if self.dependencies and self.python and self.python.count(".") == 2:  # one interpreter, not a range
            raise ValueError(
                f"python `{self.python}` pins the interpreter of a pure-PyPI stack; a stack with [dependencies] "
                f'pins its conda python there (python = "{self.python}")'
            )
        return self

    @field_validator("platforms")
    @classmethod
    def _valid_platforms(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        check_platforms(value)
        return value


def plain_spec(validated: StackSpec) -> records.StackSpec:
    """The plain record of a stack these models accepted (`model/spec.py`'s, field for field)."""
    return plain_record(validated)  # type: ignore[no-any-return]


def plain_record(value: Any) -> Any:
    """The plain record of any value these models accepted (records within as records)."""
    if isinstance(value, BaseModel):
        record = getattr(records, type(value).__name__)
        return record(**{name: plain_record(getattr(value, name)) for name in type(value).model_fields})
    if isinstance(value, tuple):
        return tuple(plain_record(item) for item in value)
    if isinstance(value, dict):
        return {key: plain_record(item) for key, item in value.items()}
    return value


def fields_of(record: object) -> Any:
    """A plain record's fields as these models take them (by name), records within as their fields: a base stack's
    value, validated again with what a team stack adds."""
    if is_dataclass(record) and not isinstance(record, type):
        return {item.name: fields_of(getattr(record, item.name)) for item in fields(record)}
    if isinstance(record, tuple):
        return tuple(fields_of(item) for item in record)
    if isinstance(record, dict):
        return {key: fields_of(item) for key, item in record.items()}
    return record
