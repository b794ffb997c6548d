"""Use cases materialize and check: a lock becomes an environment (content-addressed, atomic, hash-checked,
one at a time per target path), and an environment is compared with its manifest (drift)."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lockgen.adapters import archive_safety, env_manifest, installers, package_store
from lockgen.adapters.file_digest import file_digest
from lockgen.adapters.lockfile_yaml import load_lock
from lockgen.errors import UserError
from lockgen.model.spec import PLATFORM_OF_MACHINE


def choose_platform(lock_platforms: tuple[str, ...], wanted: str | None) -> str:
    if wanted:
        if wanted not in lock_platforms:
            raise UserError(f"the lock has no platform `{wanted}`", f"platforms in it: {', '.join(lock_platforms)}")
        return wanted
    import platform as host

    native = PLATFORM_OF_MACHINE.get(host.machine(), "")
    if native in lock_platforms:
        return native
    raise UserError(f"the lock covers {', '.join(lock_platforms)}, not this host's {native or host.machine()}",
                    "pass --platform to choose one")


def default_prefix(lock_digest: str, name: str) -> Path:
    return package_store.lockgen_home() / "envs" / f"{lock_digest[:16]}-{name}"


Meter = Callable[[str, int, int], None]


def materialize(lock_path: Path, platform: str | None, prefix: Path | None,
                progress: Callable[[str], None], meter: Meter | None = None) -> tuple[Path, str]:
    """The prefix holding exactly the lock's packages, and its environment digest."""
    lock = load_lock(lock_path)
    chosen = choose_platform(lock.metadata.platforms, platform)
    lock_digest = file_digest(lock_path)
    name = f"{lock.meta('target') or lock_path.name.split('.')[0]}-{chosen}"
    final = (prefix or default_prefix(lock_digest, name)).absolute()
    final.parent.mkdir(parents=True, exist_ok=True)
    with open(final.parent / f".{final.name}.lock", "w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)  # two runs of one lock make one environment
        _sweep(final.parent, final.name)
        if (final / env_manifest.MANIFEST).is_file():
            manifest, _ = env_manifest.read(final)
            if manifest.get("lock_sha256") == lock_digest:
                progress(f"{final} is already materialized")
                return final, manifest["environment_digest"]
            raise UserError(f"{final} holds another lock's environment", "choose another --prefix or remove it")
        if final.exists():
            raise UserError(f"{final} exists and is not a lockgen environment", "choose another --prefix")
        temp = final.parent / f".{final.name}.tmp-{os.getpid()}"
        shutil.rmtree(temp, ignore_errors=True)
        try:
            digest = build_environment(lock, lock_digest, chosen, temp, final, progress, meter)
            os.rename(temp, final)
        finally:
            shutil.rmtree(temp, ignore_errors=True)
    return final, digest


def build_environment(lock, lock_digest: str, platform: str, temp: Path, final: Path, progress: Callable[[str], None],
                      meter: Meter | None = None, venv_interpreter: str | None = None) -> str:
    """Builds the environment in `temp`, patched for `final`; returns its digest. A pure-PyPI venv is made
    with this host's Python, then pointed at `venv_interpreter` when given (an image's base Python)."""
    conda = [p for p in lock.packages_for(platform) if p.manager == "conda"]
    pip = [p for p in lock.packages_for(platform) if p.manager == "pip"]
    started = time.perf_counter()
    if conda:
        archives = []
        for index, package in enumerate(conda, 1):
            archive = package_store.fetch(package)
            archive_safety.check_archive(archive, f"`{package.name}` {package.version} ({package.url})")
            archives.append(archive)
            if meter is not None:
                meter("fetch and check conda packages", index, len(conda))
            elif index == len(conda):
                progress(f"fetched {index} conda packages (hash-checked)")
        installers.install_conda(archives, temp, final, platform, package_store.lockgen_home() / "rattler-cache")
        _record_origins(temp, conda)
        progress(f"linked {len(conda)} conda packages in {time.perf_counter() - started:.1f}s")
    elif pip:
        python = lock.meta(f"python.{platform}")
        if not python:
            raise UserError("the lock has pip entries but no conda python and no recorded Python version",
                            "re-resolve it with lockgen resolve")
        # an image's interpreter, when this host has it at the same path, makes the venv byte for byte the
        # one a bare-metal materialize with that interpreter gives (pyvenv.cfg records its exact version)
        same_here = venv_interpreter is not None and Path(venv_interpreter).exists()
        installers.make_venv(temp, venv_interpreter if same_here else python)
    if pip:
        installers.install_pip(pip, temp / "bin" / "python")
        progress(f"installed {len(pip)} wheels (hash-checked)")
        if not conda and venv_interpreter:
            installers.point_venv_at(temp, venv_interpreter)
    manifest, stats = env_manifest.build(temp)
    digest = env_manifest.digest(manifest)
    env_manifest.write(temp, manifest, stats, {"environment_digest": digest, "lock_sha256": lock_digest,
                                               "platform": platform, "prefix": str(final)})
    return digest


def _record_origins(prefix: Path, packages: list) -> None:
    """conda-meta names where each package came from: the lock's URL, not the local store file rattler read."""
    by_name = {p.name: p for p in packages}
    for record_path in (prefix / "conda-meta").glob("*.json"):
        record = json.loads(record_path.read_text())
        package = by_name.get(record.get("name"))
        if package is not None:
            record["url"] = package.url
            record["channel"] = package.url.rsplit("/", 2)[0]
            record_path.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")


def _sweep(folder: Path, name: str) -> None:
    """Removes temporary folders of interrupted runs (their process is gone)."""
    for leftover in folder.glob(f".{name}.tmp-*"):
        pid = leftover.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(leftover, ignore_errors=True)


@dataclass(frozen=True)
class Drift:
    missing: list[str]
    extra: list[str]
    modified: list[str]

    @property
    def clean(self) -> bool:
        return not (self.missing or self.extra or self.modified)


def manifest_drift(recorded: dict, current: dict) -> Drift:
    """Files missing, extra or changed between a recorded manifest and one built from the files now."""
    before = {e["path"]: e for e in recorded["files"]}
    now = {e["path"]: e for e in current["files"]}
    return Drift(sorted(before.keys() - now.keys()), sorted(now.keys() - before.keys()),
                 sorted(p for p in before.keys() & now.keys() if before[p] != now[p]))


def check(prefix: Path, full: bool) -> Drift:
    """Files missing, extra or changed against the manifest; only files whose size or mtime moved are
    re-hashed unless `full`."""
    if not (prefix / env_manifest.MANIFEST).is_file():
        if (prefix / "conda-meta").is_dir():
            return _check_conda_meta(prefix)
        raise UserError(f"{prefix} has no lockgen manifest and no conda-meta", "materialize it with lockgen materialize")
    manifest, stats = env_manifest.read(prefix)
    recorded = {e["path"]: e for e in manifest["files"]}
    present = set(env_manifest.walk(prefix))
    modified = []
    for relative in sorted(present & recorded.keys()):
        info = (prefix / relative).lstat()
        if not full and stats.get(relative) == [info.st_size, info.st_mtime_ns]:
            continue
        if env_manifest.entry_of(prefix, relative) != recorded[relative]:
            modified.append(relative)
    return Drift(sorted(recorded.keys() - present), sorted(present - recorded.keys()), modified)


@dataclass(frozen=True)
class StoreEntry:
    path: Path
    lock_sha256: str
    environment_digest: str
    platform: str


def list_envs() -> list[StoreEntry]:
    """Every environment in the store, by name."""
    root = package_store.lockgen_home() / "envs"
    entries = []
    for path in sorted(root.iterdir()) if root.is_dir() else []:
        if path.is_dir() and not path.name.startswith(".") and (path / env_manifest.MANIFEST).is_file():
            manifest, _ = env_manifest.read(path)
            entries.append(StoreEntry(path, manifest["lock_sha256"], manifest["environment_digest"], manifest["platform"]))
    return entries


def gc(roots: list[Path], dry_run: bool) -> list[Path]:
    """Removes store environments no lock under `roots` refers to (by the lock file's sha256)."""
    wanted = {file_digest(p) for root in roots
              for p in ([root] if root.is_file() else root.rglob("*.conda-lock.yml"))}
    removed = []
    for entry in list_envs():
        if entry.lock_sha256 not in wanted:
            removed.append(entry.path)
            if not dry_run:
                trash = entry.path.parent / f".{entry.path.name}.tmp-gc"
                os.rename(entry.path, trash)  # atomic: the entry disappears at once, then is deleted
                shutil.rmtree(trash)
    return removed


def _check_conda_meta(prefix: Path) -> Drift:
    """Drift of an environment lockgen did not make (say, by `rattler.install` itself), against the
    paths and hashes its conda-meta records list. Files under conda-meta/ and caches are not judged."""
    expected: dict[str, dict] = {}
    for record_path in (prefix / "conda-meta").glob("*.json"):
        for entry in json.loads(record_path.read_text()).get("paths_data", {}).get("paths", []):
            expected[entry["_path"]] = entry
    present = {p for p in env_manifest.walk(prefix) if not p.startswith("conda-meta/") and p != "CACHEDIR.TAG"}
    modified = []
    for relative in sorted(present & expected.keys()):
        entry, path = expected[relative], prefix / relative
        digest = entry.get("sha256_in_prefix") or entry.get("sha256")
        if entry.get("path_type") == "softlink" or path.is_symlink() or digest is None:
            continue
        if file_digest(path) != digest:
            modified.append(relative)
    missing = sorted(p for p in expected.keys() - present if not (prefix / p).is_symlink())
    return Drift(missing, sorted(present - expected.keys()), modified)
