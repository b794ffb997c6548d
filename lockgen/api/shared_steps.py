"""Steps several use cases share, below them (never a use case itself, importing none): the platform
of a lock to work on, where an environment of a lock lives by default, and building one (hash-checked
packages linked and installed into a temporary folder, patched for its final path, its manifest
written)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from lockgen.adapters import archive_safety, conda_meta, env_manifest, home, installers, package_store
from lockgen.core.platforms import choose_platform
from lockgen.errors import UserError
from lockgen.model.lock import Lock

Meter = Callable[[str, int, int], None]


def lock_platform(lock: Lock, wanted: str | None) -> str:
    """The platform of `lock` to work on: `wanted`, else this host's."""
    return choose_platform(lock.metadata.platforms, wanted, home.native_platform(), home.machine())


def default_prefix(lock_digest: str, name: str) -> Path:
    return home.store_envs() / f"{lock_digest[:16]}-{name}"


def build_environment(lock: Lock, lock_digest: str, platform: str, temp: Path, final: Path, progress: Callable[[str], None],
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
        installers.install_conda(archives, temp, final, platform, home.lockgen_home() / "rattler-cache")
        conda_meta.record_origins(temp, conda)
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
