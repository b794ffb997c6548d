"""The uv adapter: resolves PyPI requirements for one target platform with `uv pip compile`.

uv (the `uv` package's binary) runs once per target x platform, from any host: `--python-platform`
names the target's platform and glibc, `--python-version` the interpreter, `--format pylock.toml`
gives every wheel's URL and sha256. Wheels only by default (`--only-binary :all:`): a lock must not
depend on compiling on the target. Runs are independent processes, so several go at once.

Wheels only also means no interpreter runs: `--python-version` and `--python-platform` are all uv needs,
so it is told not to download a managed CPython of that version (`--no-python-downloads`), which it
otherwise tries on every run where the host lacks one: some 5 s on a connected host, about 9 s of retries
on one that cannot reach python-build-standalone, for an identical pylock.toml. With builds allowed
(`no-build = false`) uv keeps its default, since building an sdist needs an interpreter of that version.

`routes` send named packages (a CPU target's torch) to their own index: the requirements are then written as
a pyproject.toml whose `[tool.uv.sources]` name an explicit index for each, which uv reads nothing else from.

Two inputs come from a team's base. `stand_ins` are its check-only builds (a vendor's torch, which no index
publishes): each is offered to uv as a wheel of that name and version with no files and no requirements of
its own, in a `--find-links` folder, so the team's requirements on it are solved against its version, and
the stand-in is dropped from what uv returns (the base's entry is the lock's). `preferred` versions are
written as an existing `pylock.toml` output, which uv prefers to keep (the solve without the base's holds
then moves only what it must).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import tempfile
import threading
import zipfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from lockgen.adapters.tool_runner import run_tool
from lockgen.core.credentials import scrub_text
from lockgen.core.pypi.wheel_names import best_for_target
from lockgen.digests import file_digest
from lockgen.errors import ChannelError, ToolMissingError, UnsatisfiableError, UserError
from lockgen.model.lock import LockedPackage, PackageHash
from lockgen.model.names import normalize
from lockgen.model.names import MACHINE_OF_PLATFORM


@dataclass(frozen=True)
class PypiRequest:
    """One uv resolution: what to resolve, for which interpreter and platform, from which indexes."""

    label: str
    platform: str
    glibc: str
    python: str
    requirements: tuple[str, ...]
    constraints: tuple[str, ...]
    stand_ins: tuple[tuple[str, str], ...]  # (name, version) of builds no index has: offered as empty wheels
    preferred: tuple[LockedPackage, ...]  # versions uv keeps unless the requirements move them
    index_url: str
    extra_index_urls: tuple[str, ...]
    exclude_newer: dt.date | dt.datetime | None
    no_build: bool
    routes: tuple[tuple[str, str], ...] = ()  # (package, index): these names come from that index only
    local_sources: tuple[tuple[str, str], ...] = ()  # (package, absolute folder): a local package uv reads there

    def requirement_lines(self) -> tuple[str, ...]:
        """The requirements as uv reads them: a local package's as `name[extras] @ file:///its/folder`."""
        folders = {normalize(name): folder for name, folder in self.local_sources}
        lines = []
        for line in self.requirements:
            name = normalize(re.split(r"[\s\[<>=!~;@(]", line.strip(), maxsplit=1)[0])
            lines.append(f"{line} @ {Path(folders[name]).as_uri()}" if name in folders else line)
        return tuple(lines)

    def python_platform(self) -> str:
        return python_platform(self.platform, self.glibc)


def python_platform(platform: str, glibc: str) -> str:
    """uv's `--python-platform` for a conda platform and a glibc version (`x86_64-manylinux_2_28`)."""
    return f"{MACHINE_OF_PLATFORM[platform]}-manylinux_{glibc.replace('.', '_')}"


def uv_binary() -> str:
    """The `uv` package's executable, found once per process under a lock: the platforms are resolved by threads at
    once, and `find_uv_bin` reads `sysconfig`, whose variables Python 3.11 fills unguarded on first use (a thread
    read `EXE` as None while another filled them: exit 3 on a kept resolve, which no longer imports what filled them
    before the threads started)."""
    with _UV_FOUND_LOCK:
        if not _UV_FOUND:
            try:
                from uv import find_uv_bin

                _UV_FOUND.append(find_uv_bin())
            except (ImportError, FileNotFoundError):
                raise ToolMissingError("uv", "pip install uv (lockgen depends on it)") from None
        return _UV_FOUND[0]


_UV_FOUND: list[str] = []
_UV_FOUND_LOCK = threading.Lock()


def _command(uv: str, request: PypiRequest, folder: Path) -> list[str]:
    source = folder / ("pyproject.toml" if request.routes else "requirements.in")
    command = [
        uv,
        "pip",
        "compile",
        str(source),
        "--output-file",
        str(folder / "pylock.toml"),
        "--format",
        "pylock.toml",
        "--python-version",
        request.python,
        "--python-platform",
        request.python_platform(),
        "--index-url",
        request.index_url,
        "--no-header",
        "--quiet",
        "--color",
        "never",
    ]
    if request.constraints:
        command += ["--constraints", str(folder / "constraints.txt")]
    if request.stand_ins:
        command += ["--find-links", str(folder / "stand-ins")]
    for url in request.extra_index_urls:
        command += ["--extra-index-url", url]
    if request.exclude_newer is not None:
        command += ["--exclude-newer", request.exclude_newer.isoformat()]
    if request.no_build:
        command += ["--only-binary", ":all:", "--no-python-downloads"]
    return command


def resolve(request: PypiRequest) -> list[LockedPackage]:
    """The packages uv chooses, as lock entries (of each, the wheel an installer picks on the target, with its
    sha256)."""
    uv = uv_binary()
    with tempfile.TemporaryDirectory(prefix="lockgen-uv-") as tmp:
        folder = Path(tmp)
        (folder / "requirements.in").write_text("\n".join(request.requirement_lines()) + "\n")
        if request.routes:
            (folder / "pyproject.toml").write_text(_routed_project(request))
        (folder / "constraints.txt").write_text("\n".join(request.constraints) + "\n")
        stood_in = tuple(_write_stand_in(folder / "stand-ins", name, version) for name, version in request.stand_ins)
        if request.preferred:  # uv prefers the versions an existing output file holds (a stand-in's too)
            (folder / "pylock.toml").write_text(_preferences(request.preferred + stood_in))
        done = run_tool(_command(uv, request, folder), f"resolving {request.label}", timeout_s=900, check=False)
        if done.returncode != 0:
            raise _error(request, done.stderr)
        text = (folder / "pylock.toml").read_text()
    return _packages(request, text)


def _routed_project(request: PypiRequest) -> str:
    """The requirements as a pyproject.toml whose `[tool.uv.sources]` send each routed name to its own explicit
    index (uv reads no other package from it; the project itself is not part of the output)."""
    indexes = list(dict.fromkeys(index for _, index in request.routes))
    lines = [
        "[project]",
        'name = "lockgen-request"',
        'version = "0"',
        f"dependencies = [{', '.join(json.dumps(r) for r in request.requirement_lines())}]",
        "",
        "[tool.uv.sources]",
    ]
    lines += [f'{json.dumps(name)} = {{ index = "route-{indexes.index(index)}" }}' for name, index in request.routes]
    for number, index in enumerate(indexes):
        lines += ["", "[[tool.uv.index]]", f'name = "route-{number}"', f"url = {json.dumps(index)}", "explicit = true"]
    return "\n".join(lines) + "\n"


def _write_stand_in(folder: Path, name: str, version: str) -> LockedPackage:
    """A wheel of `name==version` holding only its metadata: what uv needs to solve around a build it cannot
    fetch (it is never installed: the base has the real one); returned as an entry, for the preferences."""
    folder.mkdir(exist_ok=True)
    stem = f"{re.sub(r'[-_.]+', '_', name)}-{version}"
    files = {
        f"{stem}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{stem}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: lockgen\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{stem}.dist-info/RECORD": "",
    }
    path = folder / f"{stem}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in files.items():
            archive.writestr(member, text)
    return LockedPackage(
        name=name,
        version=version,
        manager="pip",
        platform="",
        url=path.as_uri(),
        hash=PackageHash(sha256=file_digest(path)),
        dependencies={},
    )


def _preferences(packages: tuple[LockedPackage, ...]) -> str:
    """A pylock.toml of `packages` (name, version, wheel): what `uv pip compile` reads from its output file as
    the versions to keep."""
    lines = ['lock-version = "1.0"', 'created-by = "lockgen"']
    for package in packages:
        wheel = f'{{ url = {json.dumps(package.url)}, hashes = {{ sha256 = "{package.hash.sha256}" }} }}'
        lines += [
            "",
            "[[packages]]",
            f"name = {json.dumps(package.name)}",
            f"version = {json.dumps(package.version)}",
            f"wheels = [{wheel}]",
        ]
    return "\n".join(lines) + "\n"


def _packages(request: PypiRequest, text: str) -> list[LockedPackage]:
    import tomllib

    document = tomllib.loads(text)
    packages = []
    stand_ins = {(normalize(name), version) for name, version in request.stand_ins}
    local = {normalize(name) for name, _ in request.local_sources}
    for entry in document.get("packages", []):
        if (
            normalize(entry["name"]),
            str(entry.get("version")),
        ) in stand_ins:  # the base's build: its entry is the lock's
            continue
        if "directory" in entry:  # a local package: its entry is made from its folder (`local_source`), not uv's
            if normalize(entry["name"]) not in local:
                raise UserError(
                    f"{request.label}: `{entry['name']}` comes from the folder "
                    f"{entry['directory'].get('path', '')}, which the stack does not name",
                    "name each local package in [pypi-dependencies] with its own `path` (a local package's path "
                    "dependencies too)",
                )
            continue
        wheels = entry.get("wheels") or []
        if not wheels:
            raise UserError(
                f"{request.label}: `{entry['name']}` {entry.get('version')} has no wheel for "
                f"{request.python_platform()} / Python {request.python}",
                "pin a version with wheels, or allow builds with `no-build = false` in [pypi-options]",
            )
        wheel = _best_wheel(request, wheels)
        packages.append(
            LockedPackage(
                name=entry["name"],
                version=str(entry["version"]),
                manager="pip",
                platform=request.platform,
                url=wheel["url"],
                hash=PackageHash(sha256=wheel["hashes"]["sha256"]),
                dependencies={},
            )
        )
    return packages


def _best_wheel(request: PypiRequest, wheels: list[dict]) -> dict:
    """The wheel an installer picks on the target among those uv lists (all compatible ones, by file name)."""
    names = {unquote(urlsplit(w["url"]).path).rsplit("/", 1)[-1]: w for w in wheels}
    best = best_for_target(sorted(names), request.python, MACHINE_OF_PLATFORM[request.platform], request.glibc)
    return names[best] if best is not None else wheels[0]


def _error(request: PypiRequest, stderr: str) -> Exception:
    lines = [scrub_text(line.strip()) for line in stderr.strip().splitlines() if line.strip()]
    text = " ".join(lines)
    mentioned = frozenset(name for name in _requested_names(request) if re.search(rf"\b{re.escape(name)}\b", text))
    if "No solution found" in text or "unsatisfiable" in text:
        return UnsatisfiableError(
            f"{request.label}: the PyPI requirements are unsatisfiable", text[:1500], request.label, mentioned
        )
    if any(
        word in text
        for word in (
            "Failed to fetch",
            "error sending request",
            "dns error",
            "Connection refused",
            "connection",
            "timed out",
        )
    ):
        return ChannelError(
            f"{request.label}: cannot reach the package index: {lines[-1] if lines else ''}"[:400],
            "check [pypi-options] index-url and the network",
        )
    if "Failed to parse" in text or "Expected" in text:
        return UserError(
            f"{request.label}: invalid PyPI requirement: {lines[-1] if lines else ''}"[:400],
            "check [pypi-dependencies] (PEP 508 names, PEP 440 specifiers)",
        )
    return UnsatisfiableError(
        f"{request.label}: uv failed: {lines[-1] if lines else 'no message'}"[:400],
        text[:1500],
        request.label,
        mentioned,
    )


def _requested_names(request: PypiRequest) -> set[str]:
    """The project names the request's requirements and constraints name (for what a conflict mentions)."""
    return {
        re.split(r"[\s\[<>=!~;@(]", line.strip(), maxsplit=1)[0].lower()
        for line in request.requirements + request.constraints
        if line.strip()
    }
