"""Builds small conda channels of real packages for tests: real `.conda` and `.tar.bz2` archives,
indexed by rattler's own indexer into a real `repodata.json`."""

from __future__ import annotations

import asyncio
import io
import json
import tarfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import rattler.index
import zstandard

PLACEHOLDER = "/opt/anaconda1anaconda2anaconda3"


@dataclass(frozen=True)
class Pkg:
    name: str
    version: str
    build: str = "h0_0"
    build_number: int = 0
    depends: tuple[str, ...] = ()
    constrains: tuple[str, ...] = ()
    subdir: str = "linux-64"
    archive: str = ".conda"
    timestamp: int = 1_700_000_000_000
    files: dict[str, str | bytes] = field(default_factory=dict)
    entry_points: tuple[str, ...] = ()  # makes it a noarch: python package with these console scripts
    extra_paths: tuple[str, ...] = ()  # paths.json entries with no file behind them (malicious-package tests;
    # a trailing `@` makes the entry a softlink)
    has_prefix: str | None = None  # info/has_prefix as written (default: the prefix.txt placeholder line)
    links: dict[str, str] = field(default_factory=dict)  # symlink path -> target, in the payload and paths.json

    @property
    def stem(self) -> str:
        return f"{self.name}-{self.version}-{self.build}"


def _tar(entries: dict[str, bytes], links: dict[str, str] | None = None) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, target in sorted((links or {}).items()):
            link = tarfile.TarInfo(name)
            link.type, link.linkname, link.mtime = tarfile.SYMTYPE, target, 0
            tar.addfile(link)
        for name in sorted(entries):
            info = tarfile.TarInfo(name)
            info.size = len(entries[name])
            info.mtime = 0
            info.mode = 0o755 if name.startswith("bin/") else 0o644
            tar.addfile(info, io.BytesIO(entries[name]))
    return buffer.getvalue()


def _contents(pkg: Pkg) -> tuple[dict[str, bytes], dict[str, bytes]]:
    files = {
        k: v if isinstance(v, bytes) else v.encode()
        for k, v in (pkg.files or {f"share/{pkg.name}/README": f"{pkg.name} {pkg.version}\n"}).items()
    }
    files[f"etc/{pkg.name}/prefix.txt"] = f"installed at {PLACEHOLDER}\n".encode()
    index = {
        "name": pkg.name,
        "version": pkg.version,
        "build": pkg.build,
        "build_number": pkg.build_number,
        "depends": list(pkg.depends),
        "constrains": list(pkg.constrains),
        "license": "MIT",
        "subdir": pkg.subdir,
        "timestamp": pkg.timestamp,
    }
    noarch_python = pkg.subdir == "noarch" and any(p.startswith("site-packages/") for p in files)
    if pkg.subdir == "noarch":
        index["noarch"] = "python" if noarch_python else "generic"
    else:
        index["platform"], index["arch"] = "linux", {"linux-64": "x86_64", "linux-aarch64": "aarch64"}[pkg.subdir]
    paths = {
        "paths_version": 1,
        "paths": [
            {
                "_path": p,
                "path_type": "hardlink",
                "size_in_bytes": len(d),
                **({"file_mode": "text", "prefix_placeholder": PLACEHOLDER} if p.endswith("prefix.txt") else {}),
            }
            for p, d in sorted(files.items())
        ]
        + [
            {
                "_path": p.removesuffix("@"),
                "path_type": "softlink" if p.endswith("@") else "hardlink",
                "size_in_bytes": 0,
            }
            for p in pkg.extra_paths
        ]
        + [{"_path": p, "path_type": "softlink"} for p in sorted(pkg.links)],
    }
    info = {
        "info/index.json": json.dumps(index, indent=2).encode(),
        "info/paths.json": json.dumps(paths, indent=2).encode(),
        "info/files": "\n".join(sorted(files)).encode() + b"\n",
        "info/has_prefix": (
            pkg.has_prefix if pkg.has_prefix is not None else f"{PLACEHOLDER} text etc/{pkg.name}/prefix.txt\n"
        ).encode(),
    }
    if noarch_python:
        info["info/link.json"] = json.dumps(
            {"noarch": {"type": "python", "entry_points": list(pkg.entry_points)}, "package_metadata_version": 1}
        ).encode()
    return info, files


def write_package(pkg: Pkg, folder: Path) -> Path:
    """Writes one real package archive into `folder` (its subdir) and returns its path."""
    folder.mkdir(parents=True, exist_ok=True)
    info, files = _contents(pkg)
    if pkg.archive == ".tar.bz2":
        path = folder / f"{pkg.stem}.tar.bz2"
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:bz2", format=tarfile.PAX_FORMAT) as tar:
            for name, data in sorted({**info, **files}.items()):
                entry = tarfile.TarInfo(name)
                entry.size, entry.mtime, entry.mode = len(data), 0, 0o644
                tar.addfile(entry, io.BytesIO(data))
        path.write_bytes(buffer.getvalue())
        return path
    path = folder / f"{pkg.stem}.conda"
    compressor = zstandard.ZstdCompressor(level=3)
    members = {
        "metadata.json": json.dumps({"conda_pkg_format_version": 2}).encode(),
        f"pkg-{pkg.stem}.tar.zst": compressor.compress(_tar(files, pkg.links)),
        f"info-{pkg.stem}.tar.zst": compressor.compress(_tar(info)),
    }
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
        for name, data in members.items():  # a fixed date: the same package is the same bytes whenever it is built
            archive.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data)
    return path


def build_channel(root: Path, packages: list[Pkg]) -> Path:
    """A channel folder with every package archived and indexed (noarch always present)."""
    (root / "noarch").mkdir(parents=True, exist_ok=True)
    for pkg in packages:
        write_package(pkg, root / pkg.subdir)
    asyncio.run(rattler.index.index_fs(root, write_zst=False, write_shards=False, force=True))
    return root


def gpu_channel_packages() -> list[Pkg]:
    """A tiny CUDA world: cuda-version gating on __cuda, pytorch in CUDA and CPU builds, a GPU-only tool."""
    cuda_versions = [
        Pkg(
            "cuda-version",
            v,
            build="h0_3",
            subdir="noarch",
            constrains=(f"__cuda >={v.split('.')[0]}", f"cudatoolkit {v}|{v}.*"),
        )
        for v in ("11.8", "12.4", "12.9")
    ]
    torch = [
        Pkg("pytorch", "2.5.0", build="cuda118_h1_0", depends=("__cuda", "cuda-version >=11.8,<12")),
        Pkg("pytorch", "2.5.0", build="cuda124_h1_0", depends=("__cuda", "cuda-version >=12.4,<13")),
        Pkg("pytorch", "2.6.0", build="cuda129_h1_0", depends=("__cuda", "cuda-version >=12.9,<13")),
        Pkg("pytorch", "2.6.0", build="cpu_h1_0", archive=".tar.bz2"),
    ]
    tools = [
        Pkg("gpu-tool", "1.0", depends=("__cuda >=12",)),
        Pkg("plain-lib", "1.0", subdir="noarch", archive=".tar.bz2"),
    ]
    return cuda_versions + torch + tools


def cpu_lock(folder: Path, channel: str, names: list[str]) -> Path:
    """Resolves a one-target (cpu) stack of `names` from `channel` (a URL) in `folder`; returns its lock."""
    from lockgen.api import resolve as api

    stack = folder / "stack" / "stack.toml"
    stack.parent.mkdir()
    deps = "".join(f'{name} = "*"\n' for name in names)
    stack.write_text(
        f'[stack]\nname = "t"\nchannels = ["{channel}"]\n[dependencies]\n{deps}[targets.cpu]\narch = "cpu"\n'
    )
    api.resolve(stack)
    return stack.parent / "locks" / "cpu.conda-lock.yml"
