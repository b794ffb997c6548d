"""What the walk and the conversion read of a uv.lock's tables, kept as slotted records read as the tables were
(`uv_lock.WalkedParts` makes them as each `[[package]]` is read): a package (`KeptPackage`), an edge of its
dependencies, extras or groups (`KeptEdge`, with what the walk works out of it), its table of extras or groups
(`KeptTable`) and its wheels (`KeptWheels`, one string of their URLs and hashes; a `KeptWheel` each where not all are
as uv writes them). Each answers `[]`, `in` and `get` for the keys it keeps as the table does; a key it does not keep
is absent. A table of three keys was 184 bytes, a package's of six or more 272 to 400: a large lock holds a package
and two edges or more for each of its packages (300k in the benchmark's largest)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, overload

ABSENT: Any = object()  # a key a table did not have
_EDGE_SLOTS = {"name": "_name", "extra": "_extra", "marker": "_marker", "version": "_version", "source": "_source"}
EDGE_KEYS = tuple(_EDGE_SLOTS)  # the keys of an edge the walk reads


class KeptEdge(Mapping[str, Any]):
    """What the walk reads of an edge's table (an item of `dependencies` or of an extra's or group's list): its
    `name`, `extra`, `marker`, `version` and `source` (where it has them), read as the table is: five slots, 72
    bytes, where a table of three keys was 184 (two distinct edges or more for each package of a lock); and what the
    walk works out of it (`named`, `extras`, `candidates`: `Walked`'s parts, three slots where a tuple of them was
    64 bytes), in place of a table of those by the edge's id."""

    __slots__ = (*_EDGE_SLOTS.values(), "named", "extras", "candidates")

    def __init__(self, name: Any, extra: Any, marker: Any, version: Any, source: Any) -> None:
        """The edge whose table holds these values for its walked keys (`ABSENT` for a key it does not have)."""
        self._name = name
        self._extra = extra
        self._marker = marker
        self._version = version
        self._source = source
        # what the walk worked out of it (`_edge`), while the walks last
        self.named: tuple[str, ...] = ()
        self.extras: tuple[str, ...] = ()
        self.candidates: Sequence[dict[str, Any]] | None = None

    def _parts(self) -> tuple[Any, ...]:
        return (self._name, self._extra, self._marker, self._version, self._source)

    def __getitem__(self, key: str) -> Any:
        value = self.get(key, ABSENT)
        if value is ABSENT:
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:  # Mapping's would call __getitem__ and catch its KeyError
        return self.get(key, ABSENT) is not ABSENT  # type: ignore[arg-type]

    def get(self, key: str, default: Any = None) -> Any:  # the walk asks each edge's marker on every walk over it
        if key == "marker":
            value = self._marker
        else:
            slot = _EDGE_SLOTS.get(key) if type(key) is str else None
            value = ABSENT if slot is None else getattr(self, slot)
        return default if value is ABSENT else value

    def __iter__(self) -> Iterator[str]:
        return (key for key, value in zip(_EDGE_SLOTS, self._parts()) if value is not ABSENT)

    def __len__(self) -> int:
        return sum(1 for _ in self)


class KeptTable(Mapping[str, Any]):
    """A package's table of extras or groups (`optional-dependencies`, `dev-dependencies`: each a list of edges),
    read as the table is: its keys (a tuple held once for every table of the same keys) and its values, 104 bytes
    where a table of one key was 184 (one for each package of a lock that has extras)."""

    __slots__ = ("_keys", "_values")

    def __init__(self, keys: tuple[str, ...], values: tuple[Any, ...]) -> None:
        self._keys = keys
        self._values = values

    def __getitem__(self, key: str) -> Any:
        for known, value in zip(self._keys, self._values):
            if known == key:
                return value
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def pairs(self) -> Iterator[tuple[str, Any]]:
        """Its keys and values, as `items()` gives them, without a lookup for each."""
        return zip(self._keys, self._values)


_PACKAGE_SLOTS = {
    "name": "_name",
    "version": "_version",
    "source": "_source",
    "resolution-markers": "_markers",
    "dependencies": "_dependencies",
    "optional-dependencies": "_optional",
    "dev-dependencies": "_dev",
    "wheels": "_wheels",
    "sdist": "_sdist",
}
PACKAGE_KEYS = tuple(_PACKAGE_SLOTS)  # the keys of a package the walk and the conversion read, in this order


class KeptPackage(Mapping[str, Any]):
    """What the walk and the conversion read of a `[[package]]` table (`PACKAGE_KEYS`), read as the table is: twelve
    slots, 136 bytes, where a table of six keys or more was 272 to 400 (one for each package of a lock); the name as
    the graph keys it (`key`), worked out on the first walk over it; and the nodes of it the last walk expanded
    (`_traverse`). `pop` lets go of a key's value (the wheels and edges, once converted)."""

    __slots__ = (*_PACKAGE_SLOTS.values(), "key", "walked_by", "walked_kinds")

    def __init__(
        self,
        name: Any,
        version: Any,
        source: Any,
        markers: Any,
        dependencies: Any,
        optional: Any,
        dev: Any,
        wheels: Any,
        sdist: Any,
    ) -> None:
        """The package whose table holds these values kept for `PACKAGE_KEYS`, in their order (`ABSENT` for a key it
        does not have)."""
        self._name = name
        self._version = version
        self._source = source
        self._markers = markers
        self._dependencies = dependencies
        self._optional = optional
        self._dev = dev
        self._wheels = wheels
        self._sdist = sdist
        self.key: str | None = None
        self.walked_by: object = None  # the last walk that expanded its own node (`_traverse`)
        self.walked_kinds: tuple[Any, ...] | None = None  # that walk and the extras and groups it expanded

    def __getitem__(self, key: str) -> Any:  # each method reads its slot itself: the conversion asks them 17 times
        slot = _PACKAGE_SLOTS.get(key) if type(key) is str else None
        value = ABSENT if slot is None else getattr(self, slot)
        if value is ABSENT:
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:  # Mapping's would call __getitem__ and catch its KeyError
        slot = _PACKAGE_SLOTS.get(key) if type(key) is str else None
        return slot is not None and getattr(self, slot) is not ABSENT

    def get(self, key: str, default: Any = None) -> Any:
        slot = _PACKAGE_SLOTS.get(key) if type(key) is str else None
        value = ABSENT if slot is None else getattr(self, slot)
        return default if value is ABSENT else value

    def pop(self, key: str, default: Any = None) -> Any:
        slot = _PACKAGE_SLOTS.get(key) if type(key) is str else None
        if slot is None:
            return default
        value = getattr(self, slot)
        setattr(self, slot, ABSENT)
        return default if value is ABSENT else value

    def let_go_of_walked(self) -> None:
        """Lets go of its wheels and edges (`pop` of each: the conversion is over with them)."""
        self._wheels = self._dependencies = self._optional = self._dev = ABSENT

    def __iter__(self) -> Iterator[str]:
        return (key for key, slot in _PACKAGE_SLOTS.items() if getattr(self, slot) is not ABSENT)

    def __len__(self) -> int:
        return sum(1 for _ in self)


class KeptWheel(Mapping[str, Any]):
    """What the walk reads of a wheel's table, its `url` and `hash` (where it has them), read as the table is: two
    slots, where a table of two keys was 184 bytes (two wheels or more for each package of a lock)."""

    __slots__ = ("_hash", "_url")

    def __init__(self, url: Any = ABSENT, hash: Any = ABSENT) -> None:
        self._url = url
        self._hash = hash

    @classmethod
    def of(cls, table: dict[str, Any]) -> KeptWheel:
        return cls(table.get("url", ABSENT), table.get("hash", ABSENT))

    def __getitem__(self, key: str) -> Any:
        value = self._url if key == "url" else self._hash if key == "hash" else ABSENT
        if value is ABSENT:
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:  # Mapping's would call __getitem__ and catch its KeyError
        return (self._url if key == "url" else self._hash if key == "hash" else ABSENT) is not ABSENT

    def get(self, key: str, default: Any = None) -> Any:
        value = self._url if key == "url" else self._hash if key == "hash" else ABSENT
        return default if value is ABSENT else value

    def __iter__(self) -> Iterator[str]:
        return (key for key, value in (("url", self._url), ("hash", self._hash)) if value is not ABSENT)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _raw_sha256s(digests: list[str]) -> bytes | None:
    """The digests' bytes, one after another, where each is `sha256:` and 64 lowercase hex digits, else None: read
    back to the same hex, so nothing else `fromhex` takes (capitals, spaces) passes (a pattern matched each was a
    tenth of the reduce)."""
    if not all(len(digest) == 71 and digest.startswith("sha256:") for digest in digests):
        return None
    hexes = "".join([digest[7:] for digest in digests])
    try:
        raw = bytes.fromhex(hexes)
    except ValueError:
        return None
    return raw if raw.hex() == hexes else None


class KeptWheels(Sequence[dict[str, str]]):
    """A package's wheels where each is a table with a `url` and a `hash` string, neither holding a line end: one
    string, each wheel's URL and hash on lines of their own, read back as tables of the two (the same values) when
    the package is converted: plain tables, made and read in C, where `KeptWheel`s were each read by a call (the
    conversion reads a wheel's url and hash five times). A list of two wheels, their slots and four strings was 660
    bytes (six blocks of the allocator), the string is 330: traced, the benchmark's lock kept 1,508 bytes a package,
    1,220 so. Where every URL is ASCII and every hash `sha256:` and 64 lowercase hex digits (as uv writes them), the
    string is bytes: the URLs' lines, then each digest's 32 bytes (`count` of them), 240 bytes for the benchmark's
    two wheels."""

    __slots__ = ("_count", "_lines")

    def __init__(self, lines: str | bytes, count: int | None = None) -> None:
        self._lines = lines
        self._count = count

    @classmethod
    def of(cls, wheels: list[Any]) -> KeptWheels | None:
        """The wheels as one string, or None where one is not a table of a `url` and a `hash` that are line-free
        strings (kept as a list of `KeptWheel`s, read as before)."""
        urls: list[str] = []
        digests: list[str] = []
        for wheel in wheels:
            if type(wheel) is not dict:
                return None
            url, digest = wheel.get("url"), wheel.get("hash")
            if type(url) is not str or type(digest) is not str or "\n" in url or "\n" in digest:
                return None
            urls.append(url)
            digests.append(digest)
        if not urls:
            return None
        joined = "\n".join(urls)
        raw = _raw_sha256s(digests) if joined.isascii() else None
        if raw is not None:
            return cls(joined.encode("ascii") + raw, len(urls))
        return cls("\n".join(part for pair in zip(urls, digests) for part in pair))

    def _wheels(self) -> list[dict[str, str]]:
        if isinstance(self._lines, bytes):
            count = self._count or 0
            urls = self._lines[: -32 * count].decode("ascii").split("\n")
            raw = self._lines[-32 * count :]
            return [{"url": url, "hash": "sha256:" + raw[32 * at : 32 * at + 32].hex()} for at, url in enumerate(urls)]
        lines = self._lines.split("\n")
        return [{"url": url, "hash": digest} for url, digest in zip(lines[::2], lines[1::2])]

    def __iter__(self) -> Iterator[dict[str, str]]:
        return iter(self._wheels())

    def __len__(self) -> int:
        if isinstance(self._lines, bytes):
            return self._count or 0
        return (self._lines.count("\n") + 1) // 2

    @overload
    def __getitem__(self, index: int) -> dict[str, str]: ...

    @overload
    def __getitem__(self, index: slice) -> list[dict[str, str]]: ...

    def __getitem__(self, index: int | slice) -> dict[str, str] | list[dict[str, str]]:
        return self._wheels()[index]
