"""Every input bounded (issue 47, item 4): a file a user names is a regular file of a sane size before it is read (a
FIFO, device or socket refused by name, never waited on), a document nested past any real one is refused, not a
RecursionError, a uv.lock imports in time linear in its size, and the inputs that ended in exit 3 (a certificate dated
9999, an archive written under /proc, an image whose layer is refused checked without its lock) are refused cleanly."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.markers import Marker

from lockgen.adapters.foreign_locks import read_foreign
from lockgen.adapters.uv_lock import UvChoices


def _uv_lock_of_extras(packages: int) -> str:
    """A uv.lock whose project asks a chain of packages each for its extra `fast`: as many active extras as
    packages, and every edge under a marker naming an extra."""
    parts = ['version = 1\nrequires-python = ">=3.10"\n\n[[package]]\nname = "app"\nversion = "0.1.0"\nsource = { virtual = "." }\ndependencies = [\n    { name = "pkg0", extra = ["fast"] },\n]\n']
    for i in range(packages):
        edge = f'    {{ name = "pkg{i + 1}", extra = ["fast"], marker = "extra != \'extra-3-app-cpu\'" }},\n' if i + 1 < packages else ""
        wheel = f'    {{ url = "https://files.example/pkg{i}-1.0-py3-none-any.whl", hash = "sha256:{i:064x}" }},\n'
        parts.append(
            f'\n[[package]]\nname = "pkg{i}"\nversion = "1.0"\nsource = {{ registry = "https://pypi.org/simple" }}\n'
            f"dependencies = [\n{edge}]\nwheels = [\n{wheel}]\n\n[package.optional-dependencies]\nfast = [\n{edge}]\n"
        )
    return "".join(parts)


def test_a_uv_lock_import_hands_each_marker_only_the_extras_it_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every marker was evaluated against the whole set of active extras, which the evaluator normalises item by item
    on every test, and in the activation pass that set was copied for every edge: an import quadratic in the lock's
    size (10k packages 10 s, 30k 108 s). Each marker now sees only the items it names."""
    handed: list[int] = []
    evaluate = Marker.evaluate

    def counting(self: Marker, environment: dict[str, object] | None = None, context: str = "metadata") -> bool:
        handed.append(len(environment["extras"]) if environment and isinstance(environment.get("extras"), (set, frozenset)) else 0)  # type: ignore[arg-type]
        return evaluate(self, environment, context)  # type: ignore[arg-type]

    monkeypatch.setattr(Marker, "evaluate", counting)
    lock = tmp_path / "uv.lock"
    lock.write_text(_uv_lock_of_extras(60))
    imported = read_foreign(lock, None, UvChoices(python="3.12"))
    assert {p.name for p in imported.packages} == {f"pkg{i}" for i in range(60)}
    assert handed and max(handed) <= 1, max(handed)
