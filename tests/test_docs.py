"""The documentation stays walkable: a short README that reaches every command, links that land on a file and
a heading, and every `lockgen.*` key a committed lock carries explained in the lockfile reference."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer
import yaml

from lockgen.cli.app import app
from tests.conftest import REPO

DOCS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def command_names(group: typer.Typer, prefix: str = "lockgen") -> list[str]:
    """Every command the CLI offers, as typed: `lockgen resolve`, `lockgen cert verify`, ..."""
    names = [f"{prefix} {c.name or c.callback.__name__}" for c in group.registered_commands]  # type: ignore[union-attr]
    for sub in group.registered_groups:
        names += command_names(sub.typer_instance, f"{prefix} {sub.name}")  # type: ignore[arg-type]
    return names


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    return {slug(line.lstrip("#")) for line in path.read_text().splitlines() if line.startswith("#")}


def test_the_readme_is_short_and_reaches_every_command() -> None:
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    table = readme.split("## Commands", 1)[1].split("\n## ", 1)[0]
    reference = (REPO / "docs" / "reference" / "cli.md").read_text()
    commands = command_names(app)
    assert len(commands) > 20
    for name in commands:
        assert f"`{name}" in table, f"{name} is missing from the README's command table"
        assert f"`{name}" in reference, f"{name} is missing from docs/reference/cli.md"


def test_every_relative_link_lands_on_a_file_and_a_heading() -> None:
    broken = []
    for doc in DOCS:
        text = re.sub(r"```.*?```", "", doc.read_text(), flags=re.S)  # code blocks hold no links
        for target in LINK.findall(text):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            file_part, _, anchor = target.partition("#")
            path = (doc.parent / file_part).resolve() if file_part else doc
            if not path.exists():
                broken.append(f"{doc.relative_to(REPO)}: {target} (no such file)")
            elif anchor and path.suffix == ".md" and anchor not in anchors(path):
                broken.append(f"{doc.relative_to(REPO)}: {target} (no such heading)")
    assert broken == []


@pytest.mark.slow
def test_every_key_a_committed_lock_carries_is_documented() -> None:
    reference = (REPO / "docs" / "reference" / "lockfile-keys.md").read_text()
    documented = set(re.findall(r"`(lockgen\.[a-z0-9.<>/_-]+)`", reference))
    for lock in sorted((REPO / "envs" / "examples").rglob("*.conda-lock.yml")):
        for key in yaml.safe_load(lock.read_text())["metadata"].get("custom_metadata") or {}:
            general = re.sub(r"\.(linux-64|linux-aarch64|noarch)$", ".<platform>", key)
            general = re.sub(r"^lockgen\.requested\.(conda|pypi)\..+", r"lockgen.requested.\1.<name>", general)
            general = re.sub(r"^lockgen\.index\..+", "lockgen.index.<channel>/<subdir>", general)
            assert general in documented, f"{lock.relative_to(REPO)}: {key} is not in docs/reference/lockfile-keys.md"


def test_every_podman_run_the_docs_show_runs_on_a_low_nofile_limit() -> None:
    """podman's default nofile and nproc limits for root (above some hosts' hard limits) made the README's `podman run`
    fail where the tests, passing their own `--ulimit`, passed: each `podman run` the docs show takes this host's
    nofile limits and podman's own nproc default (a `--ulimit` given replaces podman's defaults, so both are given)
    (`--ulimit nofile=$(ulimit -n):$(ulimit -Hn) --ulimit nproc=32768:32768`), and the walk-through runs the README's
    exactly so (tests/test_walkthrough.py)."""
    shown = [
        (doc.name, line) for doc in DOCS for line in doc.read_text().splitlines() if line.startswith("podman run ")
    ]
    assert shown, "the README shows the exported image running"
    assert [
        (name, line)
        for name, line in shown
        if " --ulimit nofile=$(ulimit -n):$(ulimit -Hn) --ulimit nproc=32768:32768 " not in line
    ] == []
