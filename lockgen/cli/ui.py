"""Terminal output: data on stdout, progress and errors on stderr, `error:` / `hint:` without tracebacks.

Every line for a person goes out through `say`, `progress` or `fail`, which escape what could end or hide a line
or drive the terminal (`model.names.escaped`): a certificate's, a lock's or an image's text is shown as it is, one
line each; an error line is cut at `terminal.ERROR_LIMIT` characters, saying how many went. A document in a format
of its own (JSON, Prometheus, JUnit, a shell's activation) goes out by `print_json` or `emit`, escaped by that
format's rules. The functions themselves live in `terminal`, which the fast path shares without typer.

Exit codes: 0 ok, 1 a user-level failure (a `LockgenError`), 2 usage (typer), 3 unexpected.
"""

from __future__ import annotations

import functools
import math
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import typer

from lockgen.cli.terminal import (
    Meter as Meter,
    emit as emit,
    print_environment as print_environment,
    print_json as print_json,
    progress as progress,
    refusal,
    say as say,
    say_error,
)

if TYPE_CHECKING:  # the models import pydantic: a command that needs no model (a repeated materialize) loads none
    from lockgen.model.requests import Environment

F = TypeVar("F", bound=Callable[..., Any])


class _State:
    verbose = False


state = _State()


def environment(
    prefix: Path | None,
    python: str | None,
    image: str | None,
    refusal: tuple[str, str, int],
    required: bool = False,
    insecure: bool = False,
    image_prefix: str | None = None,
) -> Environment | None:
    """The one environment the flags name, None when none: the one-of rule of --prefix, --python and --image,
    checked here once; more than one (or none, when `required`) fails with `refusal` (message, hint, exit code)."""
    from lockgen.model.requests import Image, Prefix, Python

    named: list[Environment] = [Prefix(prefix)] if prefix is not None else []
    named += [Python(python)] if python is not None else []
    named += [Image(image, insecure, image_prefix)] if image is not None else []
    if len(named) > 1 or (required and not named):
        fail(*refusal)
    return named[0] if named else None


def noise_fraction(noise: float) -> float:
    """`--noise` (`cert compare`, `fleet status`) as the comparison takes it: a finite fraction, 0 or more; any other
    is a usage error (exit 2): a negative one made every unchanged figure a regression, NaN or infinity none."""
    if not math.isfinite(noise) or noise < 0:
        fail(f"--noise {noise:g} is not a fraction of 0 or more", "--noise 0.05 (a change within 5% is noise)", 2)
    return noise


def fail(message: str, hint: str = "", code: int = 1) -> NoReturn:
    say_error(message, hint)
    raise typer.Exit(code)


def handles_errors(command: F) -> F:
    """Turns lockgen's errors into `error:`/`hint:` lines and exit codes (tracebacks only with -v)."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except (typer.Exit, typer.Abort, KeyboardInterrupt, BrokenPipeError):
            raise
        except Exception as exc:  # lockgen's errors, and the last line of defence: no traceback unless -v
            if state.verbose:
                traceback.print_exc()
            fail(*refusal(exc))

    return wrapper  # type: ignore[return-value]
