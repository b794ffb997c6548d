"""What use cases return: plain frozen values the CLI renders as text or JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypedDict

if TYPE_CHECKING:  # a type only here: resolve, which returns TargetResult, loads no conformance model
    from lockgen.model.conformance import ConformanceReport

if TYPE_CHECKING:  # a pydantic model: `verify` builds it
    from lockgen.model.certificate import Certificate, CertificateBody

if TYPE_CHECKING:  # the lock's records: `pin` builds them
    from lockgen.model.lock import Lock

from lockgen.model.resolved import TargetResult  # what `add`/`remove` say of a re-locked target


class ConformanceJson(TypedDict):
    """`check --lock --json`'s verdict of an environment."""

    clean: bool
    lock_sha256: str
    platform: str
    where: str
    expected_digest: str
    image_digest: str | None
    base_digest: str | None
    problems: list[str]
    allowed_foreign: dict[str, str | None]
    by_path_only: int
    read_every_byte: str | None
    local_packages: list[str]
    counts: dict[str, int]
    report: dict[str, object]


@dataclass(frozen=True)
class RelockedTarget:
    """A target `lockgen add` or `remove` re-locked: resolve's word on its lock, and what changed in it, one
    line a package (`+ linux-64 rich 14.0.0`, as `lockgen diff` writes them); None where it had no lock."""

    result: TargetResult
    changes: tuple[str, ...] | None


@dataclass(frozen=True)
class StackEdited:
    """What `lockgen add` or `remove` did: the stack's lines put in (`+ rich = "*"`) and taken out (`- ...`),
    each target re-locked, and the targets left out by `--target` whose locks are stale now."""

    stack: Path
    lines: tuple[str, ...]
    targets: tuple[RelockedTarget, ...]
    stale: tuple[str, ...] = ()


@dataclass(frozen=True)
class Drift:
    """Files of an environment missing, extra or changed against what it should hold."""

    missing: list[str]
    extra: list[str]
    modified: list[str]
    unsafe: list[str] = field(default_factory=list)  # "PATH (setuid)": a mode no package installs
    read_every_byte: str | None = None  # when every byte was last read (UTC), as `Conformance.read_every_byte`

    @property
    def clean(self) -> bool:
        return not (self.missing or self.extra or self.modified or self.unsafe)


@dataclass(frozen=True)
class ImageDrift:
    """An image's environment against the manifest it records: the digest it records, the one its files give
    now, and the files that differ."""

    recorded: str
    recomputed: str
    drift: Drift

    @property
    def clean(self) -> bool:
        return self.recorded == self.recomputed and self.drift.clean


@dataclass(frozen=True)
class ExportedImage:
    """What `lockgen export` wrote: the image's manifest digest and its environment's digest."""

    digest: str
    environment_digest: str


@dataclass(frozen=True)
class ExportedIndex:
    """What `lockgen export` of several platforms wrote: the image index's digest and each platform's
    environment digest."""

    digest: str
    environment_digests: dict[str, str]


@dataclass(frozen=True)
class StoreEntry:
    """One environment in the store."""

    path: Path
    lock_sha256: str
    environment_digest: str
    platform: str


@dataclass(frozen=True)
class SharingEnvironment:
    """An environment that links a damaged store file (the same inode), and the shell command that makes it again."""

    prefix: Path
    repair: str


@dataclass(frozen=True)
class DamagedStoreFolder:
    """A folder of lockgen's store holding files that are not the bytes its proof kept: which store (`wheel`: uv's
    cache, `conda`: rattler's), the folder, its changed or missing files (folder-relative), where it was moved
    (None when it was only found), and the environments sharing its changed inodes."""

    store: Literal["wheel", "conda"]
    folder: Path
    files: tuple[str, ...]
    quarantined: Path | None
    environments: tuple[SharingEnvironment, ...]


@dataclass(frozen=True)
class StoreScrub:
    """`lockgen store verify`: how many store files were read again, and the folders found damaged."""

    files: int
    damaged: tuple[DamagedStoreFolder, ...]


@dataclass(frozen=True)
class Conformance:
    """Whether an environment is its lock, judged from the packages' own manifests: the report (per
    package, foreign files, modes), the expected environment's digest, and what else was wrong
    (`problems`, e.g. an image that runs as root)."""

    lock_sha256: str
    platform: str
    where: str
    expected_digest: str
    report: ConformanceReport
    problems: tuple[str, ...] = ()
    image_digest: str | None = None
    allowed: dict[str, str | None] = field(default_factory=dict)  # foreign files accepted by name -> sha256 found
    by_path_only: int = 0  # stated files whose bytes nothing here can predict (a placeholder file without its archive,
    # a rewritten wheel script, a RECORD itself): checked present, not by content
    # path -> [device, inode, size, mtime_ns, ctime_ns, sha256] of each file this check hashed (or took by its kept
    # fingerprint), as it saw them: what export takes instead of hashing the tree again; none from a kept verdict
    hashes: dict[str, list[Any]] = field(default_factory=dict, repr=False, compare=False)
    # an image's pinned base (its manifest digest), whose layers are trusted for every file outside the environment
    # and whose config the image's builds on: part of the verdict, since the lock does not name it
    base_digest: str | None = None
    # when every byte of the environment was last read (UTC, to the second): by this check, or by the one whose
    # kept fingerprints or verdict stood for reading, within the stat trust window; None: not known
    read_every_byte: str | None = None
    # a line per local package of the lock (`check --lock` of a prefix): what was proven of it and what could not be
    # proven by content, and why; never a finding (those are `problems`)
    local: tuple[str, ...] = ()

    @property
    def clean(self) -> bool:
        return self.report.clean and not self.problems

    def lines(self) -> list[str]:
        return list(self.report.lines()) + list(self.problems)

    def to_dict(self) -> ConformanceJson:
        return {
            "clean": self.clean,
            "lock_sha256": self.lock_sha256,
            "platform": self.platform,
            "where": self.where,
            "expected_digest": self.expected_digest,
            "image_digest": self.image_digest,
            "base_digest": self.base_digest,
            "problems": list(self.problems),
            "allowed_foreign": dict(self.allowed),
            "by_path_only": self.by_path_only,
            "read_every_byte": self.read_every_byte,
            "local_packages": list(self.local),
            "counts": self.report.counts,
            "report": self.report.to_dict(),
        }


@dataclass(frozen=True)
class VerifiedCertificate:
    """A certificate `cert verify` accepts (and `cert export` renders): the file's certificate, and what was proven
    of it, in words (`signature valid`, or unsigned and only its form checked)."""

    certificate: Certificate
    checked: str


@dataclass(frozen=True)
class CertificateExport:
    """A certificate rendered for a fleet tool: the text, the certificate's verdict (npd's exit status),
    and what the tool reading it will do that its writer may not expect."""

    text: str
    passed: bool
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ImportNotes:
    """What `lockgen import` tells of the lock it wrote: the foreign format, what could not come over and
    what it assumed where the file does not say."""

    format: str
    skipped: tuple[str, ...]
    assumed: tuple[str, ...]


@dataclass(frozen=True)
class PinnedLock:
    """What `pin` (and `freeze --python`) wrote: the lock, its manifests bundle, and the lock itself."""

    path: Path
    manifests: Path
    lock: Lock


@dataclass(frozen=True)
class PackedArchive:
    """What `lockgen pack` wrote: the archive, its sha256 and size, the platform and how many artifacts it holds."""

    path: Path
    sha256: str
    size: int
    platform: str
    artifacts: int


@dataclass(frozen=True)
class Verified:
    """What `lockgen verify` wrote: the certificate's path, and its body (the checks, figures and verdict)."""

    path: Path
    body: CertificateBody
