"""Channels: where a channel named in a stack really is, and the digest of each index read.

A channel is written as a name (`conda-forge`), a URL, or a local folder / `file://` URL. An alias
(`conda-forge=PATH_OR_URL`, from `--channel-alias` or `LOCKGEN_CHANNEL_ALIAS`) points a name at a
mirror or snapshot; the lock still names the channel as the stack does, and its package URLs are
those the index states for each record (`url` field, as snapshots carry; read for local indexes
only, since rattler's gateway does not pass it on), else the channel's canonical URL, so a lock
made against a mirror or snapshot installs from the real channel.
Credentials (`user:pass@`, `/t/<token>/`) never reach a lock.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

from lockgen.adapters import user_files
from lockgen.adapters.home import cache_dir
from lockgen.core import nesting
from lockgen.core.credentials import scrub_url
from lockgen.errors import ChannelError, UserError

DEFAULT_CHANNEL_BASE = "https://conda.anaconda.org"
ALIAS_ENV = "LOCKGEN_CHANNEL_ALIAS"


def parse_aliases(items: list[str], env: str | None = None) -> dict[str, str]:
    """`NAME=PATH_OR_URL` items (flags first, then the environment variable, `;`-separated)."""
    aliases: dict[str, str] = {}
    env_items = [i for i in (env or "").split(";") if i.strip()]
    for item in env_items + list(items):
        name, sep, location = item.partition("=")
        if not sep or not name.strip() or not location.strip():
            raise UserError(
                f"channel alias `{item}` is not NAME=PATH_OR_URL",
                "write e.g. --channel-alias conda-forge=../shared/snapshots/public-locks",
            )
        aliases[name.strip()] = location.strip()
    return aliases


def run_aliases(items: list[str]) -> dict[str, str]:
    """The aliases of this run: `$LOCKGEN_CHANNEL_ALIAS`'s, then the flags' `items` (a flag's wins)."""
    return parse_aliases(items, os.environ.get(ALIAS_ENV))


@dataclass(frozen=True)
class Channel:  # not slotted: `url` is cached on the instance
    """A channel of the stack, located: local folder or remote URL."""

    name: str
    location: str
    local_path: Path | None
    canonical_base: str

    @property
    def is_local(self) -> bool:
        return self.local_path is not None

    @functools.cached_property
    def url(self) -> str:
        return self.local_path.resolve().as_uri() if self.local_path else self.location


def locate_channel(name: str, aliases: dict[str, str], base_dir: Path) -> Channel:
    """Where `name` (as written in the stack) is, after aliases; relative folders are from `base_dir`."""
    written = name
    location = aliases.get(name, name)
    canonical = _canonical_base(written)
    if location.startswith(("http://", "https://")):
        return Channel(written, location.rstrip("/"), None, canonical)
    if location.startswith("file://"):
        path = Path(unquote(urlsplit(location).path))
    elif "/" in location or location.startswith(".") or name in aliases:
        path = Path(location).expanduser()
        if not path.is_absolute():
            path = (base_dir if name not in aliases else Path.cwd()) / path
    else:
        return Channel(written, f"{DEFAULT_CHANNEL_BASE}/{location}", None, canonical)
    if not path.is_dir():
        raise ChannelError(
            f"channel `{written}`: folder `{path}` does not exist",
            "check the path, or point the name elsewhere with --channel-alias NAME=PATH_OR_URL",
        )
    return Channel(written, str(path), path, canonical)


def _canonical_base(written: str) -> str:
    if written.startswith(("http://", "https://")):
        return scrub_url(written.rstrip("/"))
    if written.startswith("file://") or "/" in written or written.startswith("."):
        return ""
    return f"{DEFAULT_CHANNEL_BASE}/{written}"


@dataclass
class LocalIndex:
    """One local `repodata.json`: its path, digest, and the URLs its records state."""

    channel: Channel
    subdir: str
    path: Path
    sha256: str
    stated_urls: dict[str, str] = field(default_factory=dict)

    def lock_url(self, file_name: str) -> str:
        """The URL a lock records for a package of this index."""
        if file_name in self.stated_urls:
            return scrub_url(self.stated_urls[file_name])
        if self.channel.canonical_base:
            return f"{self.channel.canonical_base}/{self.subdir}/{file_name}"
        return f"{self.channel.url.rstrip('/')}/{self.subdir}/{file_name}"


def read_local_index(channel: Channel, subdir: str) -> LocalIndex | None:
    """The index of one subdir of a local channel, or None when the channel has no such subdir.

    Its digest and stated URLs are cached by the file's (size, mtime, inode), as git's index does,
    so an unchanged multi-megabyte index is neither re-hashed nor re-parsed."""
    assert channel.local_path is not None
    path = channel.local_path / subdir / "repodata.json"
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ChannelError(f"channel `{channel.name}`: cannot read {path}: {exc}", "check the channel folder") from None
    fingerprint = [stat.st_size, stat.st_mtime_ns, stat.st_ino]
    memo = cache_dir() / "index" / (hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:32] + ".json")
    try:
        cached = nesting.loads(user_files.read_bytes(memo))
        if cached["stat"] == fingerprint:
            return LocalIndex(channel, subdir, path, cached["sha256"], cached["urls"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    index = _scan_index(channel, subdir, path)
    try:
        memo.parent.mkdir(parents=True, exist_ok=True)
        temp = memo.with_suffix(f".{os.getpid()}.tmp")
        temp.write_text(json.dumps({"stat": fingerprint, "sha256": index.sha256, "urls": index.stated_urls}))
        os.replace(temp, memo)
    except OSError:
        pass  # a read-only cache only costs speed
    return index


def _scan_index(channel: Channel, subdir: str, path: Path) -> LocalIndex:
    try:
        raw = user_files.read_bytes(path)
    except OSError as exc:
        raise ChannelError(
            f"channel `{channel.name}`: cannot read {path}: {exc.strerror or exc}", "check the channel folder"
        ) from None
    index = LocalIndex(channel, subdir, path, "sha256:" + hashlib.sha256(raw).hexdigest())
    if b'"url"' in raw:
        try:
            data = nesting.loads(raw)
        except ValueError as exc:
            raise ChannelError(
                f"channel `{channel.name}`: {path} is not valid JSON ({exc})", "re-create the channel index"
            ) from None
        for key in ("packages", "packages.conda"):
            for file_name, record in (data.get(key) or {}).items():
                if isinstance(record, dict) and isinstance(record.get("url"), str):
                    index.stated_urls[file_name] = record["url"]
    return index


def index_key(channel: Channel, subdir: str) -> str:
    """The lock metadata key of an index read: the channel as the stack names it, credentials scrubbed."""
    return f"{scrub_url(channel.name)}/{subdir}"
