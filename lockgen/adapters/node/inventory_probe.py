"""Runs the inventory probe (`inventory_snippet`, stdlib only) in a target interpreter and validates what it
prints into `lockgen.model.inventory`: the installed distributions, and the re-hash of their files.

The probe sends raw texts; the RECORD, WHEEL and entry-point parsers of `lockgen.core.env.wheel_files` read them
here, so an installed RECORD is held to the same rules as a wheel's (no absolute paths, no climbing out of
the prefix). The interpreter runs isolated (`-I`: no PYTHON* variables, no user site, no script folder).
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from lockgen.core.env.wheel_files import parse_entry_points, parse_record, parse_wheel
from lockgen.adapters.tool_runner import run_tool
from lockgen.errors import ToolMissingError, UserError
from lockgen.model.inventory import InstalledDistribution, InstalledFile, Inventory, NodeInventory, Rehash

SNIPPET = Path(__file__).with_name("inventory_snippet.py")


def _run(python: Path, mode: str, timeout_s: float) -> Any:
    what = f"the inventory probe ({mode}) in {python}"
    try:
        done = run_tool(
            [str(python), "-I", "-B", "-c", SNIPPET.read_text(), mode],
            what,
            "is it a Python 3.8+ interpreter?",
            timeout_s=timeout_s,
        )
    except ToolMissingError:
        raise UserError(
            f"interpreter {python} not found", "pass the environment's python (PREFIX/bin/python)"
        ) from None
    try:
        return json.loads(done.stdout)
    except ValueError:
        raise UserError(f"{what} printed no JSON", "is the interpreter wrapped by a script that prints?") from None


def _distribution(raw: dict[str, Any], where: str) -> InstalledDistribution:
    if not raw.get("name") or not raw.get("version"):
        raise UserError(f"{where}: {raw.get('dist_info')} has no Name or Version in METADATA", "the install is broken")
    base = posixpath.dirname(raw["dist_info"])
    rows = parse_record(raw["record"], base) if raw.get("record") is not None else ()
    wheel = parse_wheel(raw["wheel"]) if raw.get("wheel") else None
    scripts = parse_entry_points(raw["entry_points"]) if raw.get("entry_points") else ()
    return InstalledDistribution(
        name=raw["name"],
        version=raw["version"],
        installer=(raw.get("installer") or "").strip() or None,
        dist_info=raw["dist_info"],
        wheel_tags=wheel.tags if wheel else (),
        record=tuple(InstalledFile(path=r.path, sha256=r.sha256, size=r.size) for r in rows),
        record_sha256=raw.get("record_sha256"),
        scripts=tuple(s.name for s in scripts),
        direct_url=raw.get("direct_url"),
    )


def probe(python: Path, timeout_s: float = 120.0) -> Inventory:
    """The inventory of the distributions `python` has installed."""
    raw = _run(python, "inventory", timeout_s)
    try:
        distributions = tuple(
            sorted(
                (_distribution(d, str(python)) for d in raw["distributions"]), key=lambda d: (d.name.lower(), d.version)
            )
        )
        return Inventory(
            format=raw["format"],
            python=raw["python"],
            platform=raw["platform"],
            site_packages=raw["site_packages"],
            distributions=distributions,
        )
    except (KeyError, TypeError, AttributeError, ValidationError) as exc:
        raise UserError(
            f"the inventory probe of {python} printed an unexpected document ({type(exc).__name__})",
            "run the probe of the same lockgen version",
        ) from None


def rehash(python: Path, timeout_s: float = 600.0) -> Rehash:
    """Every file the installed RECORDs of `python` list, hashed again on disk; rows that disagree."""
    raw = _run(python, "rehash", timeout_s)
    try:
        return Rehash.model_validate(raw)
    except ValidationError as exc:
        raise UserError(
            f"the re-hash probe of {python} printed an unexpected document ({exc.error_count()} errors)",
            "run the probe of the same lockgen version",
        ) from None


def node_inventory(python: Path, progress: Callable[[str], None]) -> NodeInventory:
    """What `freeze --inventory` writes of `python`: its distributions, then every RECORD row re-hashed on disk."""
    found = probe(python)
    progress(f"{len(found.distributions)} distributions in {python} (Python {found.python}, {found.platform})")
    checked = rehash(python)
    progress(f"re-hashed {checked.checked} recorded files: {len(checked.mismatches)} differ from their RECORD")
    return NodeInventory(inventory=found, rehash=checked)
