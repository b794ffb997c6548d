"""What every foreign lock format is to `lockgen import`: one `ForeignFormat` per format, in its own module, and
listed once in `foreign_locks.FORMATS`. A format says how it is recognised (from the file's name and content),
what it reads (the file into an `Imported`), the options it takes (the `ImportOptions` fields; any other option
given is refused by `foreign_locks`, naming the format), and what it refuses (the entries that cannot come over,
in words, as the guide lists them; each one skipped is named with its reason in `Imported.skipped`).
"""

from __future__ import annotations

import codecs
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from lockgen.adapters import user_files
from lockgen.adapters.pypi.python_wheels import UnhashedWheel
from lockgen.errors import UserError
from lockgen.model.lock import LockedPackage
from lockgen.model.requests import ImportOptions


@dataclass(frozen=True)
class Imported:
    """What a foreign lock held: its format, channels, and entries per platform."""

    format: str
    channels: tuple[str, ...]
    packages: tuple[LockedPackage, ...]
    sha256: str
    skipped: tuple[str, ...] = ()  # what could not come over, one reason each
    virtual_packages: dict[str, str] = field(default_factory=dict)  # platform -> "__cuda=12.9 __glibc=2.28" (pixi v7)
    assumed: tuple[str, ...] = ()  # what the file does not say and the import took as given, one line each
    python: str | None = None  # the CPython a PyPI lock (uv.lock, pylock.toml) was read for: its wheels' interpreter
    unhashed: tuple[UnhashedWheel, ...] = ()  # wheels a PyPI lock chose without a sha256, with their index

    @property
    def platforms(self) -> tuple[str, ...]:
        return tuple(sorted({p.platform for p in self.packages}))


_CHANGED = "import it again once nothing writes to it"
_BLOCK = 8 << 20  # bytes of a foreign lock read, hashed and decoded at a time
# characters a piece holds at least (where the text goes on): more than glibc's largest threshold for a block of
# its own (32 MiB), so each piece is mapped alone and given back once let go of (pieces on the heap left it full)
_PIECE = 36 << 20


def read_in_pieces(path: Path) -> tuple[list[str], str]:
    """The text of the file at `path` (UTF-8, undecodable bytes replaced, as `bytes.decode` replaces them) in
    pieces of about `_PIECE` characters, each but the last ending at a line end (before a line that starts with
    `[[` where the piece's last block has one: a TOML array of tables' header, where a reader may cut the text
    without joining two pieces), and the sha256 of its bytes. The bytes and the text of a 300k-package uv.lock
    were held at once (400 MiB), and its text whole while it was read. An OSError where the file cannot be read
    (`user_files.opened`: only a regular file is)."""
    hasher = hashlib.sha256()
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pieces: list[str] = []
    parts: list[str] = []  # the decoded blocks of the next piece
    held = 0  # their characters
    with user_files.opened(path) as stream:
        while block := stream.read(_BLOCK):
            hasher.update(block)
            parts.append(decoder.decode(block))
            held += len(parts[-1])
            if held >= _PIECE:
                last = parts[-1]
                cut = last.rfind("\n[[") + 1 or last.rfind("\n") + 1
                if cut:
                    pieces.append("".join([*parts[:-1], last[:cut]]))
                    parts = [last[cut:]]
                    held = len(parts[0])
    parts.append(decoder.decode(b"", final=True))
    if any(parts):
        pieces.append("".join(parts))
    return pieces, hasher.hexdigest()


class ForeignFile:
    """A foreign lock as read once: its path, the sha256 of its bytes, its text (in pieces, each but the last
    ending at a line end, joined for a reader that asks for it whole), and that text read as YAML at most once
    (pixi.lock and conda-lock.yml are told apart by their parsed keys, then read from them).

    A reader that parses the pieces itself takes them with `handed_pieces`, after which the file no longer holds
    them: a large uv.lock's text is let go of a piece at a time as it is read, and not kept while its parsed
    document is walked."""

    def __init__(self, path: Path, text: str | list[str], sha256: str) -> None:
        self.path = path
        self.sha256 = sha256
        self._pieces: list[str] | None = [text] if isinstance(text, str) else text
        self._yaml: object = None
        self._yaml_problem: BaseException | None = None
        self._yaml_read = False

    @property
    def pieces(self) -> list[str]:
        """The text in pieces, each but the last ending at a line end (a line is never cut)."""
        if self._pieces is None:
            raise RuntimeError("the file's text was handed to its reader")
        return self._pieces

    @property
    def text(self) -> str:
        """The text whole (its pieces joined, once)."""
        pieces = self.pieces
        if len(pieces) != 1:
            pieces[:] = ["".join(pieces)]
        return pieces[0]

    def handed_pieces(self) -> list[str]:
        """The text's pieces, which this file no longer holds."""
        pieces, self._pieces = self.pieces, None
        return pieces

    def text_again(self) -> str:
        """The text read again from the file, for a reader that let go of its pieces and needs it whole: refused
        where the file's bytes are no longer those hashed (what is read must be what the import records)."""
        try:
            pieces, sha256 = read_in_pieces(self.path)
        except OSError as exc:
            raise UserError(f"cannot read `{self.path}` again: {exc.strerror or exc}", _CHANGED) from None
        if sha256 != self.sha256:
            raise UserError(f"`{self.path}` changed while it was imported", _CHANGED)
        return "".join(pieces)

    def yaml_mapping(self) -> dict[object, object] | None:
        """The text read as YAML (by the C reader where built) when it is a mapping; None when it is anything else
        or no YAML at all (`yaml_problem` says why)."""
        if not self._yaml_read:
            import yaml

            self._yaml_read = True
            try:
                self._yaml = yaml.load(self.text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
            except (yaml.YAMLError, RecursionError) as exc:
                self._yaml_problem = exc
        return self._yaml if isinstance(self._yaml, dict) else None

    @property
    def yaml_problem(self) -> BaseException | None:
        """Why the text is no YAML (the reader's error), once `yaml_mapping` has read it; None where it is."""
        return self._yaml_problem


class ForeignFormat(Protocol):
    """One foreign lock format. `name` is what messages call it (`pixi.lock`), `described` how the list of formats
    names it (`pixi.lock (v4-v7)`), `producer` what writes it (for a hint: "use the file PRODUCER wrote"),
    `takes` the `ImportOptions` fields it reads, `refuses` what cannot come over from it, in words."""

    name: str
    described: str
    producer: str
    takes: frozenset[str]
    refuses: tuple[str, ...]

    def recognises(self, file: ForeignFile) -> bool:
        """Whether `file` is of this format, by its name and content (the formats are asked in turn)."""
        ...

    def read(self, file: ForeignFile, options: ImportOptions) -> Imported:
        """The entries `file` holds for lockgen's platforms, and what could not come over; a structure the
        format does not have raises (KeyError, TypeError, ValueError...) and `foreign_locks` names the format."""
        ...
