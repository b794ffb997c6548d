"""`lockgen diff` and `lockgen render`: read-only commands over lock files."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from lockgen.cli.ui import emit, handles_errors, print_json, say
from lockgen.errors import LockgenError


@handles_errors
def diff(
    a: Path = typer.Argument(..., help="The old lock."),
    b: Path = typer.Argument(..., help="The new lock."),
    as_json: bool = typer.Option(False, "--json", help="Print changes as JSON."),
    exit_zero: bool = typer.Option(False, "--exit-zero", help="Exit 0 even when the locks differ."),
) -> None:
    """Compare two locks per platform: added (+), removed (-), changed (~); CUDA stack first. Exits 1 when
    they differ, 0 when they are the same, 2 on trouble (a lock missing or unreadable), as diff(1) does."""
    from lockgen.api.locks import diff as run

    try:
        result = run(a, b)
    except LockgenError as exc:
        exc.exit_code = 2  # GNU diff's trouble: 1 must keep meaning "they differ" to a script
        raise
    differ = bool(result.changes or result.platforms_only_in_a or result.platforms_only_in_b)
    if as_json:
        print_json(
            {
                "changes": [c.__dict__ for c in result.changes],
                "platforms_only_in_a": result.platforms_only_in_a,
                "platforms_only_in_b": result.platforms_only_in_b,
            }
        )
    else:
        for platform in result.platforms_only_in_a:
            say(f"- platform {platform}")
        for platform in result.platforms_only_in_b:
            say(f"+ platform {platform}")
        for change in result.changes:
            say(change.line())
    if differ and not exit_zero:
        raise typer.Exit(1)


@handles_errors
def import_(
    context: typer.Context,
    source: Path = typer.Argument(..., help="pixi.lock, conda-lock.yml, uv.lock, pylock.toml or an @EXPLICIT file."),
    target: str = typer.Option(..., "--target", "-t", help="Name of the lock: locks/<NAME>.conda-lock.yml."),
    environment: Optional[str] = typer.Option(None, "--environment", "-e", help="pixi environment (default: default)."),
    python: Optional[str] = typer.Option(
        None,
        "--python",
        help="uv.lock, pylock: the CPython X.Y or X.Y.Z (default: uv.lock's .python-version, else the oldest "
        "requires-python admits).",
    ),
    extra: list[str] = typer.Option(
        [], "--extra", help="uv.lock: an extra of the root project, as `uv sync --extra` (repeatable)."
    ),
    all_extras: bool = typer.Option(False, "--all-extras", help="uv.lock: every extra of the root project."),
    group: list[str] = typer.Option(
        [], "--group", help="uv.lock: a dependency group, as `uv sync --group` (repeatable)."
    ),
    no_dev: bool = typer.Option(
        False, "--no-dev", help="uv.lock: leave out the dev group (uv includes it by default)."
    ),
    no_default_groups: bool = typer.Option(
        False, "--no-default-groups", help="uv.lock: leave out [tool.uv] default-groups."
    ),
    all_groups: bool = typer.Option(
        False, "--all-groups", help="uv.lock: every dependency group, as `uv sync --all-groups`."
    ),
    only_group: list[str] = typer.Option(
        [], "--only-group", help="uv.lock: only this group, not the projects, as `uv sync --only-group` (repeatable)."
    ),
    no_group: list[str] = typer.Option(
        [], "--no-group", help="uv.lock: leave this group out, as `uv sync --no-group` (repeatable)."
    ),
    package: Optional[str] = typer.Option(
        None, "--package", help="uv.lock: the workspace member to install, as `uv sync --package`."
    ),
    all_packages: bool = typer.Option(
        False, "--all-packages", help="uv.lock: every workspace member, as `uv sync --all-packages`."
    ),
    project: Optional[Path] = typer.Option(
        None,
        "--project",
        help="uv.lock: the workspace root's pyproject.toml (default: the one beside the lock), for default-groups and "
        "the root.",
    ),
    glibc: str = typer.Option("2.28", "--glibc", help="uv.lock, pylock: the newest manylinux glibc a wheel may need."),
    allow_partial: bool = typer.Option(
        False,
        "--allow-partial",
        help="Lock the rest when a wheel has no sha256 in the file nor on its index (named as left out) "
        "instead of failing.",
    ),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Write here instead of locks/<NAME>.conda-lock.yml."),
    as_json: bool = typer.Option(
        False, "--json", help="Print {path, format, platforms: {P: {conda, pip}}, skipped, assumed} as JSON."
    ),
) -> None:
    """Turn another tool's lock into a lockgen lock (every platform it holds, hashes kept)."""
    from lockgen.api.import_lock import import_lock, import_notes
    from lockgen.cli.ui import progress
    from lockgen.model.requests import ImportOptions

    options = ImportOptions(
        environment=environment,
        python=python,
        extras=tuple(extra),
        all_extras=all_extras,
        groups=tuple(group),
        dev=not no_dev,
        no_default_groups=no_default_groups,
        all_groups=all_groups,
        only_groups=tuple(only_group),
        no_groups=tuple(no_group),
        package=package,
        all_packages=all_packages,
        project=project,
        glibc=glibc,
        allow_partial=allow_partial,
        stated=_given_on_the_command_line(context),
    )
    path, lock = import_lock(source, target, out, options)
    notes = import_notes(lock)
    for line in notes.assumed:
        progress(f"warning: {line}")
    if as_json:
        counts = {
            p: {
                "conda": sum(1 for e in lock.packages_for(p) if e.manager == "conda"),
                "pip": sum(1 for e in lock.packages_for(p) if e.manager == "pip"),
            }
            for p in lock.metadata.platforms
        }
        print_json(
            {
                "path": str(path),
                "format": notes.format,
                "platforms": counts,
                "skipped": list(notes.skipped),
                "assumed": list(notes.assumed),
            }
        )
        return
    for platform in lock.metadata.platforms:
        entries = lock.packages_for(platform)
        pip = sum(1 for p in entries if p.manager == "pip")
        progress(f"  {platform}: {len(entries) - pip} conda, {pip} pip")
    if notes.skipped:
        progress(f"  left out: {'; '.join(notes.skipped)}")
    say(path)


def _given_on_the_command_line(context: typer.Context) -> frozenset[str]:
    """The import options the command line gave, by name, those given at their default value too: click says
    where each value came from, so `--glibc 2.28` is told though it equals the default. (The source is read by
    its name: typer carries its own copy of click, whose `ParameterSource` it does not export.)"""
    from dataclasses import fields

    from lockgen.model.requests import ImportOptions

    flags = {
        flag
        for param in context.command.params
        if param.name is not None and getattr(context.get_parameter_source(param.name), "name", None) == "COMMANDLINE"
        for flag in param.opts
    }
    return frozenset(option.name for option in fields(ImportOptions) if option.metadata.get("flag") in flags)


@handles_errors
def render(
    lock: Path = typer.Argument(..., help="A lock written by lockgen resolve."),
    platform: Optional[str] = typer.Option(
        None, "--platform", "-p", help="Which platform (needed when the lock has several)."
    ),
    out: Optional[Path] = typer.Option(
        None, "--out", "-o", help="Write here instead of stdout (pylock: pylock.<target>.toml)."
    ),
    fmt: str = typer.Option(
        "explicit",
        "--format",
        "-f",
        help="explicit (conda create --file), requirements (pip --require-hashes), pylock (PEP 751 pylock.toml), "
        "environment (conda environment.yml).",
    ),
) -> None:
    """Write the lock for another tool: an @EXPLICIT file, hashed requirements, pylock.toml or environment.yml."""
    from lockgen.api.locks import pylock_name, render as run

    if fmt == "pylock" and out is None:
        out = pylock_name(lock)
    text = run(lock, platform, out, fmt)
    if out is None:
        emit(text)
    else:
        say(out)
