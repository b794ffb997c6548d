"""The package store: conda archives fetched once, hash-checked, kept by sha256 under
`$LOCKGEN_HOME/pkgs` (default `~/.lockgen/pkgs`), so materializing again or offline needs no network.
Wheel files fetched whole (the artifacts `lockgen pack` puts in an archive, and those `unpack` takes out of one) are
kept the same way under `$LOCKGEN_HOME/wheels` (`wheels()`); uv's own cache stays lockgen's wheel store for installs."""

from __future__ import annotations

import errno
import glob
import os
import shutil
import tempfile
import urllib.error
from collections.abc import Callable
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit

from lockgen.adapters import fetch_auth, http_deadline, user_files
from lockgen.adapters.store import file_guard, file_roots, transfer_progress
from lockgen.adapters.home import lockgen_home
from lockgen.core.env.confined import child
from lockgen.core.credentials import scrub_text, scrub_url
from lockgen.digests import file_digest
from lockgen.errors import ChannelError, LockFormatError
from lockgen.model.lock import LockedPackage
from lockgen.model.names import shown


def _expected(package: LockedPackage, allow_md5: bool = False) -> tuple[str, str]:
    """The algorithm and digest an archive is checked by: its sha256; its md5 only when the caller allows
    it (md5 collisions are cheap to make, so an md5-only entry proves little)."""
    if package.hash.sha256:
        return "sha256", package.hash.sha256
    if package.hash.md5 and allow_md5:
        return "md5", package.hash.md5
    if package.hash.md5:
        raise LockFormatError(
            f"`{package.name}` {package.version} is pinned by md5 only",
            "md5 is no proof of content: re-create the lock so it pins a sha256 (or materialize --allow-md5 to "
            "install it knowingly)",
        )
    raise LockFormatError(
        f"`{package.name}` has no hash in the lock", "a lock entry without a hash cannot be installed safely"
    )


def _stored_path(package: LockedPackage, store: Path, allow_md5: bool = False) -> Path:
    file_name = urlsplit(package.url).path.rsplit("/", 1)[-1]
    return child(store, f"{_expected(package, allow_md5)[1][:16]}-{file_name}", f"the archive name of `{package.name}`")


def in_store(package: LockedPackage, store: Path | None = None, allow_md5: bool = False) -> Path | None:
    """The archive of a conda entry when the store holds it with the lock's hash (checked now), else None."""
    target = _stored_path(package, store or lockgen_home() / "pkgs", allow_md5)
    algorithm, expected = _expected(package, allow_md5)
    return target if target.is_file() and file_digest(target, algorithm) == expected else None


def kept(package: LockedPackage, store: Path | None = None) -> Path | None:
    """The stored file of an entry pinned by sha256, not hashed now: for a caller that hashes every byte as it reads
    it and refuses a difference (`lockgen pack`), so the file is read once."""
    target = _stored_path(package, store or lockgen_home() / "pkgs")
    return target if package.hash.sha256 and target.is_file() else None


def fetch(
    package: LockedPackage,
    store: Path | None = None,
    allow_md5: bool = False,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """The verified archive of a conda entry, from the store or downloaded into it (temp file, then rename);
    `allow_md5`: an entry pinned by md5 alone is accepted (materialize --allow-md5); `progress` hears a long
    download's bytes (`transfer_progress.DownloadProgress`)."""
    store = store or lockgen_home() / "pkgs"
    found = in_store(package, store, allow_md5)
    if found is not None:
        return found
    algorithm, expected = _expected(package, allow_md5)
    target = _stored_path(package, store, allow_md5)
    store.mkdir(parents=True, exist_ok=True)
    file_guard.sweep_stale(store, ".fetch-*")  # partial downloads of runs that were killed
    handle, temp_name = tempfile.mkstemp(prefix=".fetch-", dir=store)
    os.close(handle)
    temp = Path(temp_name)
    guard = file_guard.hold_open(temp)
    try:
        _download(package, temp, progress)
        got = file_digest(temp, algorithm)
        if got != expected:  # the hash it has is not shown: for a file: URL that would reveal a local file's digest
            raise LockFormatError(
                f"`{package.name}` {package.version} from {scrub_url(package.url)} does not have the {algorithm} "
                f"the lock pins ({expected})",
                "the archive was changed or corrupted: refuse it, check the source",
            )
        os.replace(temp, target)
    finally:
        temp.unlink(missing_ok=True)
        os.close(guard)
    return target


def wheels() -> Path:
    """The store of wheel files kept whole, by the sha256 the lock pins."""
    return lockgen_home() / "wheels"


def admit(package: LockedPackage, source: Path, store: Path | None = None) -> Path:
    """Moves `source`, a file of lockgen's own just proven to have the sha256 the lock pins (a verified member of a
    pack archive), into the store under the entry's name; returns where it now is."""
    store = store or lockgen_home() / "pkgs"
    store.mkdir(parents=True, exist_ok=True)
    target = _stored_path(package, store)
    try:
        os.replace(source, target)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        handle, temp = tempfile.mkstemp(prefix=".fetch-", dir=store)  # another file system: copied whole, then renamed
        os.close(handle)
        try:
            shutil.copyfile(source, temp)
            os.replace(temp, target)
        finally:
            Path(temp).unlink(missing_ok=True)
    return target


def discard(archive: Path) -> None:
    """Removes a stored archive lockgen refused (and its scan marker): it is the lock's, byte for byte, but
    unsafe, so keeping it only takes space and a later run fetches and refuses it again."""
    archive.unlink(missing_ok=True)
    for marker in archive.parent.glob(glob.escape(archive.name) + ".scanned*"):  # of any scan rules' version
        marker.unlink(missing_ok=True)


def _download(package: LockedPackage, destination: Path, progress: Callable[[str], None] | None) -> None:
    """The archive at the entry's URL copied to `destination`: at most `LOCKGEN_MAX_DOWNLOAD_BYTES` (the lock
    states no size), over HTTP within `LOCKGEN_TRANSFER_DEADLINE_S` in all (`http_deadline`); `progress` hears
    its bytes, of the size the server states or the local file has."""
    parts = urlsplit(package.url)
    what, limit = f"fetching `{package.name}` {package.version} from {package.url}", http_deadline.max_download_bytes()
    said = f"fetching `{shown(package.name)}` {shown(package.version)}"

    def reporter(total: int | None) -> transfer_progress.DownloadProgress | None:
        return transfer_progress.DownloadProgress(said, total, progress) if progress is not None else None

    try:
        if parts.scheme == "file":
            with user_files.opened(file_roots.local_path(package.url, f"`{package.name}` {package.version}")) as source:
                _copy(source, destination, limit, what, reporter(os.fstat(source.fileno()).st_size))
            return
        with (
            http_deadline.Deadline(
                http_deadline.transfer_deadline_s(),
                what,
                "the channel is too slow or keeps sending; retry, or allow longer with "
                f"{http_deadline.TRANSFER_DEADLINE_ENV}",
            ) as clock,
            clock.open(fetch_auth.authorized_request(package.url), 60) as response,
        ):
            stated = response.headers.get("Content-Length") or ""
            if stated.isdigit() and int(stated) > limit:
                raise http_deadline.too_large(what, limit)
            _copy(response, destination, limit, what, reporter(int(stated) if stated.isdigit() else None))
    except urllib.error.HTTPError as exc:
        hint = (
            "the channel wants credentials: give them for its host in ~/.netrc or $RATTLER_AUTH_FILE (never in "
            "the lock)"
            if exc.code in (401, 403)
            else "check the channel; the lock names this URL"
        )
        raise ChannelError(
            f"cannot fetch `{package.name}` {package.version} from {scrub_url(package.url)}: HTTP {exc.code}", hint
        ) from None
    except (OSError, ValueError) as exc:
        raise ChannelError(
            f"cannot fetch `{package.name}` {package.version} from {scrub_url(package.url)}: {scrub_text(str(exc))}",
            f"offline? put the archive in a local channel or the package store ({lockgen_home() / 'pkgs'})",
        ) from None


def _copy(
    source: IO[bytes], destination: Path, limit: int, what: str, meter: transfer_progress.DownloadProgress | None
) -> None:
    copied = 0
    with destination.open("wb") as out:
        while block := source.read(1 << 20):
            copied += len(block)
            if copied > limit:
                raise http_deadline.too_large(what, limit)
            out.write(block)
            if meter is not None:
                meter.advanced(copied)
