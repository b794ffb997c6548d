"""Reads other tools' locks into lockgen's lock entries: pixi.lock (v4-v7), conda-lock.yml (unified v1),
`@EXPLICIT` files, uv.lock (v1) and PEP 751 pylock.toml.

Every platform a file holds comes over, with hashes kept. pixi's `default` environment is read
unless another is named. uv.lock is read as uv installs it (`adapters.foreign.uv_lock`: markers, extras,
groups, forks, and the wheel that fits each platform).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from lockgen.adapters import user_files
from lockgen.adapters.lock.lockfile_yaml import v1_lock, yaml_problem
from lockgen.adapters.foreign.pylock import read_pylock
from lockgen.adapters.pypi.python_wheels import UnhashedWheel
from lockgen.adapters.foreign.uv_lock import UvChoices, read_uv_lock
from lockgen.adapters.foreign.uv_lock_toml import read_uv_toml
from lockgen.adapters.foreign.uv_project import pinned_python, project_beside, read_uv_project
from lockgen.model.names import shown
from lockgen.core.pypi.wheel_names import parse_wheel_filename, wheel_file_name
from lockgen.errors import LockFormatError, UserError
from lockgen.model.lock import LockedPackage, PackageHash, dependency_map

_PEP751 = re.compile(r"^lock-version\s*=", re.M)  # a PEP 751 file by its content, whatever its name
_PACKAGES = re.compile(r"^\[\[packages\]\]", re.M)
_PIP_LINE = re.compile(
    r"# pip (?P<name>[A-Za-z0-9][A-Za-z0-9._-]*) @ (?P<url>[^#\s]+)(#sha256=(?P<sha256>[0-9a-f]{64}))?\s*"
)
_SDIST = re.compile(r"\.(tar\.gz|zip|tar\.bz2)$")
SUBDIRS = ("linux-64", "linux-aarch64", "linux-ppc64le", "osx-64", "osx-arm64", "win-64", "noarch")


@dataclass(frozen=True)
class Imported:
    """What a foreign lock held: its format, channels, and entries per platform."""

    format: str
    channels: tuple[str, ...]
    packages: tuple[LockedPackage, ...]
    sha256: str
    skipped: tuple[str, ...] = ()  # what could not come over, one reason each
    virtual_packages: dict[str, str] = field(default_factory=dict)  # platform -> "__cuda=12.9 __glibc=2.28" (pixi v7)
    assumed: tuple[str, ...] = ()  # what the file does not say and the import took as given, one line each
    python: str | None = None  # the CPython a PyPI lock (uv.lock, pylock.toml) was read for: its wheels' interpreter
    unhashed: tuple[UnhashedWheel, ...] = ()  # wheels a PyPI lock chose without a sha256, with their index

    @property
    def platforms(self) -> tuple[str, ...]:
        return tuple(sorted({p.platform for p in self.packages}))


def read_foreign(path: Path, environment: str | None, uv: UvChoices, project: Path | None = None) -> Imported:
    """Detects the format from the content and converts it; a file of a known format whose structure is
    broken (a missing key, a list where a string belongs, a cut-off end) is one error naming the format. A
    uv.lock is read with its workspace's pyproject.toml settings (`project`, else the one beside it)."""
    try:
        raw = user_files.read_bytes(path)
    except OSError as exc:
        raise UserError(f"cannot read `{path}`: {exc.strerror or exc}", "pass the path of a lock file") from None
    text = raw.decode("utf-8", errors="replace")
    digest = hashlib.sha256(raw).hexdigest()
    del raw  # a large lock's bytes are not held while it is converted
    form = _format_of(path, text)
    said: tuple[str, ...] = ()
    if form == "uv.lock":
        pyproject = project_beside(path, project)
        if uv.project is None and pyproject:
            uv = replace(uv, project=read_uv_project(pyproject))
        pinned = (
            pinned_python(list(dict.fromkeys([pyproject.parent, path.parent] if pyproject else [path.parent])))
            if uv.python is None
            else None
        )
        if pinned is not None:  # uv takes the workspace's pin before requires-python
            uv = replace(uv, python=pinned[0])
            said = (
                f"CPython {pinned[0]} from {pinned[1].name} beside the "
                f"{'pyproject.toml' if pyproject else 'lock'}, as uv picks it (--python overrides)",
            )
    try:
        if form == "uv.lock":  # the text is not held while the walk runs: the parsed document is what it reads
            document = read_uv_toml(text)
            del text
            found = _uv(document, uv, digest)
        else:
            found = _read(form, path, text, environment, uv, digest)
        return replace(found, assumed=said + found.assumed) if said else found
    except RecursionError:  # nested past the reader: no lock of any tool is
        raise LockFormatError(
            f"`{path}` is a malformed {form}: nested deeper than a reader goes",
            f"it was edited or cut short: use the file {_producer(form)} wrote",
        ) from None
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:  # ValueError: pydantic's and
        # tomllib's errors too; the readers' own errors (LockgenError) pass through
        raise LockFormatError(
            f"`{path}` is a malformed {form}: {_what_broke(exc)}",
            f"it was edited or cut short: use the file {_producer(form)} wrote",
        ) from None


def _format_of(path: Path, text: str) -> str:
    if "@EXPLICIT" in text.splitlines():
        return "@EXPLICIT file"
    if (path.name.startswith("pylock.") and path.suffix == ".toml") or (
        _PEP751.search(text) and _PACKAGES.search(text)
    ):
        return "pylock.toml"
    if path.suffix == ".lock" and text.lstrip().startswith("version = "):
        return "uv.lock"
    return "pixi.lock or conda-lock.yml"


def _producer(form: str) -> str:
    return {"@EXPLICIT file": "conda list --explicit", "uv.lock": "uv lock", "pylock.toml": "its installer"}.get(
        form, "pixi or conda-lock"
    )


def _what_broke(exc: Exception) -> str:
    """One line for what a reader tripped over, without its internals."""
    if isinstance(exc, KeyError):
        return f"an entry lacks `{exc.args[0] if exc.args else '?'}`"
    text = str(exc).strip().splitlines()
    if type(exc).__name__ == "ValidationError":  # pydantic: the field, then what it wanted
        return f"a value has the wrong type ({' '.join(text[1:3]).strip()[:160]})"
    first = text[0] if text else type(exc).__name__
    if "at end of document" in first:
        return f"it ends mid-value ({first}): it looks truncated"
    return first[:200]


def _read(form: str, path: Path, text: str, environment: str | None, uv: UvChoices, digest: str) -> Imported:
    if form == "@EXPLICIT file":
        packages, skipped = _explicit(text, path)
        return Imported("@EXPLICIT", (), tuple(packages), digest, tuple(skipped))
    if form == "pylock.toml":
        import tomllib

        read, left, python, unhashed = read_pylock(tomllib.loads(text), uv)
        return Imported(
            f"pylock.toml (PEP 751, CPython {python})", (), read, digest, left, python=python, unhashed=unhashed
        )
    import yaml

    try:
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        if text.lstrip().startswith("version:") and "environments:" in text:
            raise LockFormatError(
                f"`{path}` looks like a truncated or damaged pixi.lock"
                + (f" at line {mark.line + 1}" if mark is not None else "")
                + f": {str(exc).splitlines()[0]}",
                "use the pixi.lock pixi wrote (pixi lock)",
            ) from None
        raise LockFormatError(
            f"`{path}` is neither a known lock format nor valid YAML{yaml_problem(exc)}",
            "import takes pixi.lock, conda-lock.yml, uv.lock, pylock.toml or an @EXPLICIT file",
        ) from None
    if isinstance(data, dict) and "environments" in data and "packages" in data:
        return _pixi(data, environment, digest)
    if isinstance(data, dict) and "environments" in data and data.get("version") in (4, 5, 6, 7):
        raise LockFormatError(
            f"`{path}` looks like a truncated pixi.lock: it has environments but no packages section",
            "it was cut short: use the pixi.lock pixi wrote (pixi lock)",
        )
    if isinstance(data, dict) and data.get("version") == 1 and "package" in data:
        return _conda_lock(data, digest, path)
    raise LockFormatError(
        f"`{path}` is not a lock format lockgen imports",
        "import takes pixi.lock (v4-v7), conda-lock.yml (v1), uv.lock (v1), pylock.toml (PEP 751) or an @EXPLICIT file",
    )


def _split_conda_file(url: str) -> tuple[str, str, str, str]:
    """(subdir, name, version, build) from a conda package URL."""
    parts = url.rstrip("/").split("/")
    file_name = parts[-1].split("#")[0]
    stem = re.sub(r"\.(conda|tar\.bz2)$", "", file_name)
    pieces = stem.rsplit("-", 2)
    if len(parts) < 2 or len(pieces) != 3:
        raise LockFormatError(
            f"`{shown(url)}` does not name a conda archive (subdir/name-version-build.conda)",
            "each conda entry's URL ends in its archive's file name",
        )
    return parts[-2], pieces[0], pieces[1], pieces[2]


def _explicit(text: str, path: Path) -> tuple[list[LockedPackage], list[str]]:
    """The conda archives of an @EXPLICIT file, and the `# pip NAME @ URL#sha256=HASH` lines conda-lock writes
    below them (its pip packages, for `pip install` after the conda ones)."""
    platform = next(
        (line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("# platform:")), None
    )
    if platform is None:
        raise LockFormatError(f"`{path}` has no `# platform:` line", "explicit files name their platform in a comment")
    packages: list[LockedPackage] = []
    skipped: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("# pip "):
            found = _PIP_LINE.fullmatch(line)
            if found is None:
                raise LockFormatError(
                    f"`{path}`: `{shown(line)}` is not `# pip NAME @ URL#sha256=HASH`",
                    "use the file `conda-lock render --kind explicit` wrote",
                )
            pip = _pip_entry(found["name"], None, found["url"], PackageHash(sha256=found["sha256"]), platform)
            _sort_into(pip, packages, skipped)
            continue
        if not line or line.startswith(("#", "@")):
            continue
        url, _, digest = line.partition("#")
        _, name, version, build = _split_conda_file(url)
        hashes = (
            PackageHash(sha256=digest.removeprefix("sha256:"))
            if digest.startswith("sha256:") or len(digest) == 64
            else PackageHash(md5=digest or None)
        )
        packages.append(
            LockedPackage(
                name=name, version=version, manager="conda", platform=platform, url=url, hash=hashes, build=build
            )
        )
    return packages, skipped


def _pip_entry(
    name: str, version: str | None, url: str, hashes: PackageHash, platform: str, **fields: Any
) -> LockedPackage | str:
    """A pip package of a conda-side lock as a lockgen entry (its version from the wheel's name when the line
    gives none), or why it cannot be one: not a wheel (an sdist is built on install), or no hash."""
    file_name = wheel_file_name(url)
    label = f"{platform}: `{name}` {version or ''}".rstrip()
    try:
        wheel = parse_wheel_filename(file_name)
    except UserError:
        what = "an sdist (it would be built on install)" if _SDIST.search(file_name) else "no wheel"
        return f"{label} is {what}: {shown(file_name)}; lockgen locks wheels only"
    if not (hashes.sha256 or hashes.md5):
        return f"{label} has no hash in the file ({shown(file_name)}): lockgen pins every archive by its hash"
    return LockedPackage(
        name=name, version=version or wheel.version, manager="pip", platform=platform, url=url, hash=hashes, **fields
    )


def _sort_into(found: LockedPackage | str, packages: list[LockedPackage], skipped: list[str]) -> None:
    """An entry converted into lockgen's, kept; or why it cannot be one, kept to be named."""
    if isinstance(found, LockedPackage):
        packages.append(found)
    else:
        skipped.append(found)


def _conda_lock(data: dict[str, Any], digest: str, path: Path) -> Imported:
    """A conda-lock.yml read by the one v1 reader (`lockfile_yaml.v1_lock`); its pip entries are kept when they
    are wheels with a hash, and a conda entry without a `build` (conda-lock writes none) takes its archive's."""
    entries = [
        {k: v for k, v in e.items() if k != "source"} if isinstance(e, dict) else e for e in data["package"] or []
    ]
    lock = v1_lock({**data, "package": entries}, str(path), "use the conda-lock.yml conda-lock wrote")
    packages: list[LockedPackage] = []
    skipped: list[str] = []
    for entry in lock.package:
        if entry.manager == "pip":
            pip = _pip_entry(
                entry.name,
                entry.version,
                entry.url,
                entry.hash,
                entry.platform,
                dependencies=entry.dependencies,
                category=entry.category,
                optional=entry.optional,
            )
            _sort_into(pip, packages, skipped)
            continue
        packages.append(entry if entry.build else entry.model_copy(update={"build": _split_conda_file(entry.url)[3]}))
    return Imported(
        "conda-lock.yml v1", tuple(c.url for c in lock.metadata.channels), tuple(packages), digest, tuple(skipped)
    )


def _pixi(data: dict[str, Any], environment: str | None, digest: str) -> Imported:
    version = data.get("version")
    if version not in (4, 5, 6, 7):
        raise LockFormatError(f"pixi.lock version {version!r} is not supported", "lockgen imports pixi.lock v4 to v7")
    environments = data["environments"]
    name = environment or "default"
    if name not in environments:
        raise UserError(f"pixi.lock has no environment `{name}`", f"environments: {', '.join(environments)}")
    env = environments[name]
    records = {}
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
            found = _pixi_entry(kind, url, records.get(url, {}), platform)
            _sort_into(found, packages, skipped)
    channels = tuple(c["url"].rstrip("/") if isinstance(c, dict) else str(c) for c in env.get("channels", []))
    return Imported(f"pixi.lock v{version}", channels, tuple(packages), digest, tuple(skipped), virtual)


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


def _pixi_entry(kind: str, url: str, record: dict[str, Any], platform: str) -> LockedPackage | str:
    hashes = PackageHash(md5=record.get("md5"), sha256=record.get("sha256"))
    if kind == "pypi":
        name = record.get("name") or url.split("/")[-1].split("-")[0]
        return _pip_entry(name, str(record["version"]) if "version" in record else None, url, hashes, platform)
    _, name, version, build = _split_conda_file(url)
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


def _uv(document: dict[str, Any], choices: UvChoices, digest: str) -> Imported:
    found = read_uv_lock(document, choices)
    return Imported(
        f"uv.lock v1 (CPython {found.python})",
        (),
        found.packages,
        digest,
        found.skipped,
        assumed=found.assumed,
        python=found.python,
        unhashed=found.unhashed,
    )
