"""The inventory probe that runs INSIDE the target interpreter (`python -I -c <this source> MODE`); stdlib
only and Python 3.8+, since it runs in whatever interpreter a node has. It never imports lockgen.

`inventory` prints, per `*.dist-info` folder of purelib and platlib, the raw texts (RECORD, WHEEL,
entry_points.txt, direct_url.json, INSTALLER) and METADATA's Name and Version; lockgen parses them on the
host with its one set of parsers. A legacy `*.egg-info` (a folder, or one PKG-INFO file) is listed too, by its
PKG-INFO, with no RECORD: what installed it is not known, so it can be named, never pinned. `rehash` re-hashes, in
parallel, every file each RECORD lists, so a
RECORD cannot lie about the bytes on disk; it reads nothing outside `sys.prefix` (links resolved first).
"""

import base64
import csv
import hashlib
import io
import json
import os
import stat
import sys
import sysconfig
from concurrent.futures import ThreadPoolExecutor
from email.parser import HeaderParser

PREFIX = os.path.realpath(sys.prefix)


def _raw(path):
    try:
        with open(path, "rb") as stream:
            return stream.read()
    except OSError:
        return None


def _text(path):
    raw = _raw(path)
    return None if raw is None else raw.decode("utf-8", "replace")


def _dist_infos():
    sites = []
    for key in ("purelib", "platlib"):
        site = sysconfig.get_paths()[key]
        if os.path.isdir(site) and os.path.realpath(site) not in [os.path.realpath(s) for s in sites]:
            sites.append(site)
    return [
        os.path.join(site, name)
        for site in sites
        for name in sorted(os.listdir(site))
        if name.endswith((".dist-info", ".egg-info"))
    ]


def _metadata(folder):
    if folder.endswith(".dist-info"):
        return _text(os.path.join(folder, "METADATA"))
    return _text(folder) if os.path.isfile(folder) else _text(os.path.join(folder, "PKG-INFO"))


def _distribution(folder):
    metadata = HeaderParser().parsestr(_metadata(folder) or "")
    raw = _raw(os.path.join(folder, "RECORD"))
    return {
        "name": metadata.get("Name"),
        "version": metadata.get("Version"),
        "dist_info": os.path.relpath(folder, sys.prefix).replace(os.sep, "/"),
        "installer": _text(os.path.join(folder, "INSTALLER")),
        "wheel": _text(os.path.join(folder, "WHEEL")),
        "entry_points": _text(os.path.join(folder, "entry_points.txt")),
        "record": None if raw is None else raw.decode("utf-8", "replace"),
        "record_sha256": None if raw is None else hashlib.sha256(raw).hexdigest(),
        "direct_url": _text(os.path.join(folder, "direct_url.json")),
    }


def inventory():
    site = os.path.relpath(sysconfig.get_paths()["purelib"], sys.prefix).replace(os.sep, "/")
    return {
        "format": 1,
        "python": ".".join(map(str, sys.version_info[:3])),
        "platform": sysconfig.get_platform(),
        "site_packages": site,
        "distributions": [_distribution(f) for f in _dist_infos()],
    }


def _check(job):
    name, base, path, recorded, size = job
    target = os.path.realpath(os.path.join(base, path))
    relative = os.path.relpath(os.path.normpath(os.path.join(base, path)), sys.prefix).replace(os.sep, "/")
    row = {"distribution": name, "path": relative, "recorded": recorded}
    if os.path.commonpath([PREFIX, target]) != PREFIX:
        return dict(row, problem="outside the prefix")
    try:
        info = os.lstat(target)
    except OSError:
        return dict(row, problem="missing")
    if not stat.S_ISREG(info.st_mode):
        return dict(row, problem="not a file")
    algorithm, _, _ = recorded.partition("=")
    hasher = hashlib.new(algorithm if algorithm in hashlib.algorithms_guaranteed else "sha256")
    with open(target, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            hasher.update(block)
    found = algorithm + "=" + base64.urlsafe_b64encode(hasher.digest()).rstrip(b"=").decode()
    if found != recorded or (size and size.isdigit() and int(size) != info.st_size):
        return dict(row, problem="differs", found=found)
    return None


def rehash():
    jobs = []
    for folder in _dist_infos():
        record = _text(os.path.join(folder, "RECORD")) or ""
        name = os.path.basename(folder)[: -len(".dist-info")]
        for fields in csv.reader(io.StringIO(record, newline="")):
            if len(fields) == 3 and fields[1]:
                jobs.append((name, os.path.dirname(folder), fields[0], fields[1], fields[2]))
    with ThreadPoolExecutor(max_workers=min(32, (os.cpu_count() or 1) + 4)) as pool:
        found = [m for m in pool.map(_check, jobs) if m]
    return {"checked": len(jobs), "mismatches": sorted(found, key=lambda m: (m["distribution"], m["path"]))}


if __name__ == "__main__":
    json.dump(inventory() if sys.argv[1:] == ["inventory"] else rehash(), sys.stdout, sort_keys=True)
