"""The prefix an interpreter belongs to, as the interpreter says and its own path confirms. (What it has
installed is read by the inventory probe, `adapters.node.inventory_probe`, the one reader of installed
distributions.)"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from lockgen.adapters.tool_runner import run_tool
from lockgen.errors import ToolMissingError, UserError


def prefix_of(python: str) -> Path:
    """The environment an interpreter belongs to (its `sys.prefix`)."""
    try:
        done = run_tool(
            [python, "-I", "-B", "-c", "import sys; print(sys.prefix)"],
            f"asking `{python}` for its prefix",
            "pass the environment's own interpreter",
            timeout_s=60,
        )
    except ToolMissingError:
        raise UserError(f"interpreter `{python}` not found", "pass --python PATH") from None
    prefix = done.stdout.strip()
    # an interpreter answers for itself: believe it only when it lives in the prefix it names
    where = os.path.abspath(shutil.which(python) or python)
    if not prefix or not where.startswith(os.path.join(os.path.abspath(prefix), "bin", "")):
        raise UserError(
            f"`{python}` says its environment is `{prefix}`, but it is not in that environment's bin/",
            "pass the environment's own interpreter (PREFIX/bin/python), or --prefix PREFIX",
        )
    return Path(prefix)
