"""A pixi.lock (v4 to v7) for `lockgen import`: one environment (`--environment`, else `default`), every platform
it holds (v7's named platforms by their subdir, their virtual packages such as `__cuda=12.9` kept), conda
archives and pip wheels with their hashes. Recognised by its YAML: `environments` beside `packages` (or a pixi
version and no `packages`: a file cut short), or text that starts as one where the YAML is damaged.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TypedDict, cast

from lockgen.adapters.foreign.conda_entries import pip_entry, sort_into, split_conda_file
from lockgen.adapters.foreign.document_shape import SCALAR, TEXT, YAML, Shape, read_in_shape
from lockgen.adapters.foreign.foreign_format import ForeignFile, Imported
from lockgen.adapters.pypi.python_wheels import UnhashedWheel
from lockgen.errors import LockFormatError, UserError
from lockgen.model.lock import LockedPackage, PackageHash, dependency_map
from lockgen.model.names import shown
from lockgen.model.requests import ImportOptions

SUBDIRS = ("linux-64", "linux-aarch64", "linux-ppc64le", "osx-64", "osx-arm64", "win-64", "noarch")
_VERSIONS = (4, 5, 6, 7)
_DIRECT = "direct+"  # pixi's mark on a wheel from a direct URL (rattler_lock's `UrlOrPath`), which no index lists
_PIXI_INDEXES = ("https://pypi.org/simple",)  # pixi's default where an environment names no `indexes`

# The parts of a pixi.lock read here, as its YAML holds them (a file that breaks them fails a read: KeyError,
# TypeError... which `foreign_locks` names as a malformed pixi.lock).
PixiRecord = TypedDict(
    "PixiRecord",
    {
        "conda": str,
        "pypi": str,
        "url": str,
        "name": str,
        "version": "str | int",
        "build": str,
        "md5": str,
        "sha256": str,
        "depends": list[str],
    },
    total=False,
)
PixiPlatform = TypedDict("PixiPlatform", {"name": str, "subdir": str, "virtual-packages": list[str]}, total=False)


class PixiEnvironment(TypedDict, total=False):
    channels: list[str | dict[str, str]]
    indexes: list[str]
    packages: dict[str, list[dict[str, str]]]  # platform -> [{"conda" | "pypi": URL}]


class PixiDocument(TypedDict, total=False):
    version: int
    environments: dict[str, PixiEnvironment]
    packages: list[PixiRecord]
    platforms: list[PixiPlatform]  # v7


# what is read of a pixi.lock (`PixiDocument`), each key's YAML type: judged where the reader trips
_CHANNEL = Shape(
    "text or a mapping", lambda value: isinstance(value, (str, Mapping)), keys={"url": TEXT}, required=("url",)
)
_ENTRY = Shape(
    "a mapping of a kind to its URL (`conda: URL`)",
    lambda value: isinstance(value, Mapping) and len(value) > 0,
    each=TEXT,
)
_DOCUMENT = YAML.table_of(
    {
        "environments": YAML.table_of(
            each=YAML.table_of(
                {
                    "channels": YAML.array_of(_CHANNEL),
                    "packages": YAML.table_of(each=YAML.array_of(_ENTRY)),
                }
            )
        ),
        "packages": YAML.array_of(
            YAML.table_of(
                {
                    **dict.fromkeys(("conda", "pypi", "url", "name", "build", "md5", "sha256"), TEXT),
                    "version": SCALAR,
                    "depends": YAML.array_of(TEXT),
                }
            )
        ),
        "platforms": YAML.array_of(
            YAML.table_of({"name": TEXT, "subdir": TEXT, "virtual-packages": YAML.array_of(SCALAR)})
        ),
    }
)


class PixiLock:
    """A pixi.lock as a `ForeignFormat`."""

    name = "pixi.lock"
    described = "pixi.lock (v4-v7)"
    producer = "pixi"
    takes = frozenset({"environment", "allow_partial"})
    refuses: tuple[str, ...] = ("a package from git or a local path", "a pip sdist", "a second variant of one subdir")

    def recognises(self, file: ForeignFile) -> bool:
        document = file.yaml_mapping()
        if document is None:  # damaged YAML that starts as a pixi.lock does is one, cut short or edited
            text = file.text.lstrip()
            return file.yaml_problem is not None and text.startswith("version:") and "environments:" in file.text
        return "environments" in document and ("packages" in document or document.get("version") in _VERSIONS)

    def read(self, file: ForeignFile, options: ImportOptions) -> Imported:
        document = file.yaml_mapping()
        problem = file.yaml_problem
        if isinstance(problem, RecursionError):
            raise problem
        if document is None:
            mark = getattr(problem, "problem_mark", None)
            raise LockFormatError(
                f"`{file.path}` looks like a truncated or damaged pixi.lock"
                + (f" at line {mark.line + 1}" if mark is not None else "")
                + f": {str(problem).splitlines()[0]}",
                "use the pixi.lock pixi wrote (pixi lock)",
            )
        if "packages" not in document:
            raise LockFormatError(
                f"`{file.path}` looks like a truncated pixi.lock: it has environments but no packages section",
                "it was cut short: use the pixi.lock pixi wrote (pixi lock)",
            )
        return read_in_shape(
            lambda: _pixi(cast(PixiDocument, document), options.environment, file.sha256),
            document,
            _DOCUMENT,
            "pixi.lock",
            "it was edited or cut short: use the pixi.lock pixi wrote (pixi lock)",
            YAML,
        )


def _pixi(data: PixiDocument, environment: str | None, digest: str) -> Imported:
    version = data.get("version")
    if version not in _VERSIONS:
        raise LockFormatError(
            f"pixi.lock version {YAML.value_of(version)} is not supported", "lockgen imports pixi.lock v4 to v7"
        )
    environments = data["environments"]
    name = environment or "default"
    if name not in environments:
        raise UserError(f"pixi.lock has no environment `{name}`", f"environments: {', '.join(environments)}")
    env = environments[name]
    records: dict[str | None, PixiRecord] = {}
    for record in data["packages"]:
        key = record.get("conda") or record.get("pypi") or record.get("url")
        records[key] = record
    if not env.get("packages"):
        others = [n for n, e in environments.items() if e.get("packages")]
        raise UserError(
            f"pixi environment `{name}` holds no packages", f"name one with --environment: {', '.join(others)}"
        )
    declared = {p["name"]: p for p in data.get("platforms") or [] if isinstance(p, dict) and "name" in p}  # v7
    packages: list[LockedPackage] = []
    skipped: list[str] = []
    unhashed: list[UnhashedWheel] = []
    indexes = _pixi_indexes(env.get("indexes", _PIXI_INDEXES), name)
    seen, virtual = set(), {}
    for platform_name, entries in env["packages"].items():
        platform = declared.get(platform_name, {}).get("subdir") or _pixi_platform(platform_name, entries)
        if platform in seen:
            skipped.append(f"platform `{platform_name}`: a second variant of {platform} (one lock platform per subdir)")
            continue
        seen.add(platform)
        if declared.get(platform_name, {}).get("virtual-packages"):
            virtual[platform] = " ".join(str(v) for v in declared[platform_name]["virtual-packages"])
        for entry in entries:
            kind, url = next(iter(entry.items()))
            if kind not in ("conda", "pypi") or not re.search(r"\.(conda|tar\.bz2|whl)\Z", url):
                skipped.append(f"{platform}: `{url}` {_not_an_archive(kind, url)}")
                continue
            found = _pixi_entry(kind, url, records.get(url, {}), platform, indexes)
            sort_into(found, packages, skipped, unhashed)
    channels = tuple(c["url"].rstrip("/") if isinstance(c, dict) else str(c) for c in env.get("channels", []))
    form = f"pixi.lock v{version}"
    return Imported(form, channels, tuple(packages), digest, tuple(skipped), virtual, unhashed=tuple(unhashed))


def _pixi_indexes(indexes: object, environment: str) -> tuple[str, ...]:
    """An environment's `indexes`: a list of http(s) or file URLs, refused otherwise (a string would be read
    one character at a time). An empty list names none, and is kept so: no index is made up for it."""
    if not isinstance(indexes, (list, tuple)) or not all(
        isinstance(index, str) and re.match(r"(https?|file)://", index) for index in indexes
    ):
        raise LockFormatError(
            f"pixi environment `{environment}`: `indexes` is {shown(repr(indexes), 120)}, not a list of index URLs",
            "pixi writes `indexes:` as a list of http(s) URLs: lock it again with pixi",
        )
    return tuple(indexes)


def _not_an_archive(kind: str, url: str) -> str:
    """Why a pixi entry is no locked archive, in the words a user acts on."""
    if url.startswith("git+") or ("://github.com/" in url and url.endswith(".git")):
        return "comes from git: build a wheel or package and pin it"
    if kind == "pypi" and re.search(r"\.(tar\.gz|zip|tar\.bz2)\Z", url):
        return "is an sdist (it would be built on install), not a wheel"
    if "://" not in url or url.startswith("file:"):
        return "is a local path, built from source: build a package and pin it"
    return "is not a locked archive (.conda, .tar.bz2 or .whl)"


def _pixi_platform(name: str, entries: list[dict[str, str]]) -> str:
    """pixi v7 names platforms freely (`p1`): the subdir its conda URLs come from decides."""
    if name in SUBDIRS:
        return name
    subdirs = [url.split("/")[-2] for e in entries for k, url in e.items() if k == "conda" and url.count("/") > 2]
    native = [s for s in subdirs if s != "noarch"]
    if not native:
        raise LockFormatError(f"pixi platform `{name}` has no package that tells its subdir", "name the platform")
    return max(set(native), key=native.count)


def _pixi_entry(
    kind: str, url: str, record: PixiRecord, platform: str, indexes: tuple[str, ...]
) -> LockedPackage | UnhashedWheel | str:
    """A pixi entry as lockgen's; a PyPI one without a hash may be listed by the environment's `indexes` (by
    none where pixi marks it a direct URL: `direct+https://...`, the URL after the mark, as rattler reads it)."""
    hashes = PackageHash(md5=record.get("md5"), sha256=record.get("sha256"))
    if kind == "pypi":
        name = record.get("name") or url.split("/")[-1].split("-")[0]
        version = str(record["version"]) if "version" in record else None
        if url.startswith(_DIRECT):
            return pip_entry(name, version, url.removeprefix(_DIRECT), hashes, platform, ())
        unindexed = "" if indexes else "its pixi environment names no index (`indexes: []`) to look it up in"
        return pip_entry(name, version, url, hashes, platform, indexes, unindexed=unindexed)
    _, name, version, build = split_conda_file(url)
    return LockedPackage(
        name=record.get("name", name),
        version=str(record.get("version", version)),
        manager="conda",
        platform=platform,
        dependencies=dependency_map(record.get("depends") or []),
        url=url,
        hash=hashes,
        build=record.get("build", build),
    )
