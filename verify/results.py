"""The record of one run: checks (pass/fail with a reason), figures (numbers with units) and how long
each phase took (the `phases` figures, in seconds).

Before each phase the kernel writes `@phase NAME` on stderr (`mark_phase`): a kernel that dies (a signal, an
abort inside a library) cannot say where it was, so the host names the phase from the last such line."""

from __future__ import annotations

import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import replace

from verify.schema import Check, Figure, FigureRef, KernelNumerics, as_json, phase


PHASE_MARK = "@phase "


def mark_phase(name: str) -> None:
    """Says on stderr, flushed, that the phase `name` (`group/step` for a step inside one) starts now."""
    print(f"{PHASE_MARK}{name}", file=sys.stderr, flush=True)


class Results:
    """Collects checks and figures; a check that raises is recorded as failed with the exception."""

    def __init__(self) -> None:
        self.checks: list[Check] = []
        self.figures: dict[str, dict[str, Figure]] = {}
        self.numerics: KernelNumerics | None = (
            None  # the numerics fingerprint (`verify.numerics`, `verify.determinism`)
        )
        self.log: Callable[[str], None] = lambda _: None

    def check(self, category: str, name: str, passed: bool, detail: str, value: float | None = None) -> bool:
        self.checks.append(Check(category, name, bool(passed), detail, value))
        self.log(f"{'ok  ' if passed else 'FAIL'} {category}/{name}: {detail}")
        return bool(passed)

    def figure(self, ref: FigureRef, figure: Figure) -> None:
        """Records `figure` as `ref`, its value rounded to 4 decimals."""
        value = None if figure.value is None else round(float(figure.value), 4)
        self.figures.setdefault(ref.group, {})[ref.name] = replace(figure, value=value)

    def phase(self, name: str, seconds: float) -> None:
        """The wall time one phase of the run took, as a figure of the `phases` group."""
        self.figure(phase(name), Figure(seconds, "s"))

    def passed(self) -> bool:
        return all(check.passed for check in self.checks)

    def checks_json(self) -> list[dict[str, object]]:
        """The checks as the kernel's document lists them."""
        return [check.as_json() for check in self.checks]

    def figures_json(self) -> dict[str, dict[str, dict[str, object]]]:
        """The figures as the kernel's document holds them: by group, then name."""
        return {
            group: {name: as_json(figure) for name, figure in entries.items()}
            for group, entries in self.figures.items()
        }

    def guarded(self, category: str, name: str, function: Callable[[], None]) -> None:
        """Runs a group of checks, timed as the phase `name`; an exception fails it with the error's last line."""
        mark_phase(name)
        started = time.perf_counter()
        try:
            function()
        except Exception as exc:  # a crash is a failed check, never a crashed verifier
            lines = traceback.format_exception_only(type(exc), exc)
            self.check(category, name, False, f"raised {lines[-1].strip()[:400]}")
        finally:
            self.phase(name, time.perf_counter() - started)
