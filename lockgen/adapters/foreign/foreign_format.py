"""What every foreign lock format is to `lockgen import`: one `ForeignFormat` per format, in its own module, and
listed once in `foreign_locks.FORMATS`. A format says how it is recognised (from the file's name and content),
what it reads (the file into an `Imported`), the options it takes (the `ImportOptions` fields; any other option
given is refused by `foreign_locks`, naming the format), and what it refuses (the entries that cannot come over,
in words, as the guide lists them; each one skipped is named with its reason in `Imported.skipped`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from lockgen.adapters.pypi.python_wheels import UnhashedWheel
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


class ForeignFile:
    """A foreign lock as read once: its path, the sha256 of its bytes, its text, and that text read as YAML at
    most once (pixi.lock and conda-lock.yml are told apart by their parsed keys, then read from them).

    A reader that parses the text itself takes it with `handed_text`, after which the file no longer holds it:
    a large uv.lock's text is not kept while its parsed document is walked."""

    def __init__(self, path: Path, text: str, sha256: str) -> None:
        self.path = path
        self.sha256 = sha256
        self._text: str | None = text
        self._yaml: object = None
        self._yaml_problem: BaseException | None = None
        self._yaml_read = False

    @property
    def text(self) -> str:
        if self._text is None:
            raise RuntimeError("the file's text was handed to its reader")
        return self._text

    def handed_text(self) -> str:
        """The text, which this file no longer holds."""
        text, self._text = self.text, None
        return text

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
