"""A conformance comparison's findings (`core.env.conformance.compare` makes them): per locked package what is
modified or missing, the foreign files, unsafe modes, clobbers and byte code that is not its source's, and
the files accepted by a rule; rendered as lines and as stable JSON."""

from __future__ import annotations

from dataclasses import dataclass

_SHOWN = 20


@dataclass(frozen=True)
class PackageResult:
    key: str
    modified: tuple[str, ...]
    missing: tuple[str, ...]
    absent: bool
    exec_bit: tuple[str, ...] = ()  # files whose exec bit is not the one the package installs them with
    locked: bool = True  # false: files held to the lock that are no package of it (`ExpectedPackage.locked`)

    @property
    def status(self) -> str:
        """`ok`, `missing package` (none of its files present), else `modified` (content, kind or exec bit) or
        `missing` (the first that applies; every list is kept)."""
        if self.absent:
            return "missing package"
        return "modified" if self.modified or self.exec_bit else ("missing" if self.missing else "ok")


@dataclass(frozen=True, slots=True)
class Accepted:
    path: str
    rule: str
    owner: str | None


@dataclass(frozen=True)
class Clobber:
    path: str
    owners: tuple[str, ...]


@dataclass(frozen=True)
class ConformanceReport:
    """What the comparison found; `site_packages` only shortens the human lines."""

    packages: tuple[PackageResult, ...]
    foreign: tuple[str, ...]
    mode: tuple[str, ...]
    clobbered: tuple[Clobber, ...]
    accepted: tuple[Accepted, ...]
    files_expected: int
    files_observed: int
    site_packages: str = ""
    bytecode: tuple[str, ...] = ()  # `.pyc` files beside a stated source that are not its byte code, with why

    @property
    def clean(self) -> bool:
        return (
            all(p.status == "ok" for p in self.packages)
            and not self.foreign
            and not self.mode
            and not self.clobbered
            and not self.bytecode
        )

    @property
    def counts(self) -> dict[str, int]:
        """`packages` and `ok` count the lock's packages only; the other counts every entry checked (an image's
        own lock found modified is counted there, though it is no package)."""
        statuses = [p.status for p in self.packages]
        locked = [p.status for p in self.packages if p.locked]
        return {
            "packages": len(locked),
            "ok": locked.count("ok"),
            "modified": statuses.count("modified"),
            "missing": statuses.count("missing"),
            "missing_packages": statuses.count("missing package"),
            "files_expected": self.files_expected,
            "files_observed": self.files_observed,
            "accepted": len(self.accepted),
            "foreign": len(self.foreign),
            "mode": len(self.mode),
            "clobbered": len(self.clobbered),
            "bytecode": len(self.bytecode),
        }

    def to_dict(self) -> dict[str, object]:
        """A stable JSON-able form: sorted lists, prefix-relative paths, accepted files counted by rule."""
        by_rule: dict[str, int] = {}
        for item in self.accepted:
            by_rule[item.rule] = by_rule.get(item.rule, 0) + 1
        return {
            "clean": self.clean,
            "counts": self.counts,
            "packages": [
                {
                    "package": p.key,
                    "status": p.status,
                    "modified": list(p.modified),
                    "missing": list(p.missing),
                    "exec_bit": list(p.exec_bit),
                    "locked": p.locked,
                }
                for p in self.packages
            ],
            "foreign": list(self.foreign),
            "mode": list(self.mode),
            "clobbered": [{"path": c.path, "owners": list(c.owners)} for c in self.clobbered],
            "bytecode": list(self.bytecode),
            "accepted": dict(sorted(by_rule.items())),
        }

    def lines(self) -> tuple[str, ...]:
        """One line per finding: `six 1.16.0: modified six.py`, `missing package idna 3.7`, `foreign: PATH`."""
        out = []
        for package in self.packages:
            if package.absent:
                out.append(f"missing package {package.key}")
                continue
            for word, paths in (
                ("modified", package.modified),
                ("missing", package.missing),
                ("exec bit not the package's:", package.exec_bit),
            ):
                if paths:
                    out.append(f"{package.key}: {word} {self._list(paths)}")
        out += [f"foreign: {path}" for path in self.foreign]
        out += [
            f"mode: {path} is setuid, setgid, sticky, world-writable or carries file capabilities" for path in self.mode
        ]
        out += [f"clobber: {c.path} ({', '.join(c.owners)})" for c in self.clobbered]
        out += [f"byte code: {item}" for item in self.bytecode]
        return tuple(out)

    def _list(self, paths: tuple[str, ...]) -> str:
        base = self.site_packages.rstrip("/") + "/" if self.site_packages else None
        shown = [p.removeprefix(base) if base else p for p in paths[:_SHOWN]]
        more = f" and {len(paths) - _SHOWN} more" if len(paths) > _SHOWN else ""
        return ", ".join(shown) + more
