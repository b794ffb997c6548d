"""Use case `lockgen freeze`: a lock from an existing environment (an NGC image, a hand-made node), so it
can be pinned, checked and certified like one lockgen made.

conda packages come from `conda-meta/*.json` (URL, md5, sha256, depends); Python distributions that
conda did not install come from the interpreter's installed metadata: those installed from a URL with
a recorded archive hash (`direct_url.json`, as uv and pip write for `name @ URL`) become pip entries.
A distribution installed from an index keeps no wheel URL or hash, so it cannot be locked: it is an
error listing them, or with `--skip-unpinnable` it is left out and named in the lock's metadata.
"""

from __future__ import annotations

import json
import platform as host_platform
import subprocess
from pathlib import Path

from lockgen.adapters.lockfile_yaml import dump_lock, write_atomic
from lockgen.core.pypi_rules import normalize
from lockgen.errors import UserError
from lockgen.model.lock import LOCKGEN_META_FORMAT, Lock, LockedPackage, LockMetadata, PackageHash, dependency_map
from lockgen.model.spec import PLATFORM_OF_MACHINE

_LIST_DISTRIBUTIONS = """
import json, importlib.metadata as m, sys
out = []
for d in m.distributions():
    direct = d.read_text("direct_url.json")
    out.append({"name": d.metadata["Name"], "version": d.version, "installer": (d.read_text("INSTALLER") or "").strip(),
                "direct_url": json.loads(direct) if direct else None})
print(json.dumps({"python": "%d.%d" % sys.version_info[:2], "distributions": out}))
"""


def freeze(prefix: Path | None, python: str | None, target: str, out: Path | None,
           skip_unpinnable: bool) -> tuple[Path, Lock]:
    if prefix is None and python is None:
        raise UserError("freeze needs --prefix or --python", "name the environment to pin")
    platform = PLATFORM_OF_MACHINE.get(host_platform.machine(), "linux-64")
    packages: list[LockedPackage] = []
    if prefix is not None:
        packages += _conda_records(prefix, platform)
        candidate = prefix / "bin" / "python"
        python = python or (str(candidate) if candidate.exists() else None)
    custom = {"lockgen.format": LOCKGEN_META_FORMAT, "lockgen.target": target,
              "lockgen.frozen-from": str(prefix or python)}
    if python is not None:
        pip, unpinnable, version = _pip_entries(python, platform, {normalize(p.name) for p in packages})
        packages += pip
        custom[f"lockgen.python.{platform}"] = version
        if unpinnable and not skip_unpinnable:
            shown = ", ".join(unpinnable[:6]) + (f" and {len(unpinnable) - 6} more" if len(unpinnable) > 6 else "")
            raise UserError(f"{len(unpinnable)} distributions were installed from an index and keep no wheel URL "
                            f"or hash: {shown}", "reinstall them from locked URLs, or pass --skip-unpinnable")
        if unpinnable:
            custom["lockgen.freeze-skipped"] = ", ".join(unpinnable)
    if not packages:
        raise UserError("found nothing to lock", "point --prefix at a conda environment or --python at an interpreter")
    lock = Lock(metadata=LockMetadata(content_hash={}, channels=(), platforms=(platform,), sources=(custom["lockgen.frozen-from"],),
                                      custom_metadata=custom),
                package=tuple(sorted(packages, key=lambda p: p.sort_key())))
    path = out or Path("locks") / f"{target}.conda-lock.yml"
    write_atomic(path, dump_lock(lock))
    return path, lock


def _conda_records(prefix: Path, platform: str) -> list[LockedPackage]:
    packages = []
    for record_path in sorted((prefix / "conda-meta").glob("*.json")):
        record = json.loads(record_path.read_text())
        if not record.get("url"):
            continue
        packages.append(LockedPackage(name=record["name"], version=str(record["version"]), manager="conda",
                                      platform=platform, dependencies=dependency_map(record.get("depends", [])), url=record["url"],
                                      hash=PackageHash(md5=record.get("md5"), sha256=record.get("sha256")),
                                      build=record.get("build")))
    return packages


def _pip_entries(python: str, platform: str, conda_names: set[str]) -> tuple[list[LockedPackage], list[str], str]:
    try:
        done = subprocess.run([python, "-c", _LIST_DISTRIBUTIONS], capture_output=True, text=True, timeout=120)
    except FileNotFoundError:
        raise UserError(f"interpreter `{python}` not found", "pass --python PATH") from None
    if done.returncode != 0:
        raise UserError(f"`{python}` could not list its distributions: {done.stderr.strip().splitlines()[-1:]}", "")
    listing = json.loads(done.stdout)
    entries, unpinnable = [], []
    for dist in sorted(listing["distributions"], key=lambda d: normalize(d["name"])):
        name = normalize(dist["name"])
        if dist["installer"] == "conda" or name in conda_names:
            continue
        direct = dist["direct_url"] or {}
        archive = direct.get("archive_info") or {}
        sha256 = (archive.get("hashes") or {}).get("sha256") or (archive.get("hash", "").removeprefix("sha256=") or None)
        if direct.get("url") and sha256 and not direct.get("dir_info"):
            entries.append(LockedPackage(name=name, version=dist["version"], manager="pip", platform=platform,
                                         url=direct["url"], hash=PackageHash(sha256=sha256)))
        else:
            unpinnable.append(f"{name}=={dist['version']}")
    return entries, unpinnable, listing["python"]
