"""The distributions an interpreter has installed, as that interpreter itself lists them (stdlib
`importlib.metadata`, run in a child process so any Python can be asked): name, version, installer,
and `direct_url.json` when the installer recorded one; and the prefix an interpreter belongs to."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from lockgen.adapters.tool_runner import run_tool
from lockgen.errors import ToolMissingError, UserError

_LIST_DISTRIBUTIONS = """
import json, importlib.metadata as m, sys
out = []
for d in m.distributions():
    direct = d.read_text("direct_url.json")
    out.append({"name": d.metadata["Name"], "version": d.version, "installer": (d.read_text("INSTALLER") or "").strip(),
                "direct_url": json.loads(direct) if direct else None})
print(json.dumps({"python": "%d.%d" % sys.version_info[:2], "distributions": out}))
"""


def list_distributions(python: str) -> dict[str, Any]:
    """`{"python": "X.Y", "distributions": [...]}` from interpreter `python`."""
    try:
        done = run_tool([python, "-c", _LIST_DISTRIBUTIONS], f"`{python}` listing its distributions",
                        "run it by hand to see why", timeout_s=120)
    except ToolMissingError:
        raise UserError(f"interpreter `{python}` not found", "pass --python PATH") from None
    return json.loads(done.stdout)


def prefix_of(python: str) -> Path:
    """The environment an interpreter belongs to (its `sys.prefix`)."""
    try:
        done = run_tool([python, "-I", "-c", "import sys; print(sys.prefix)"], f"asking `{python}` for its prefix",
                        "pass the environment's own interpreter", timeout_s=60)
    except ToolMissingError:
        raise UserError(f"interpreter `{python}` not found", "pass --python PATH") from None
    prefix = done.stdout.strip()
    # an interpreter answers for itself: believe it only when it lives in the prefix it names
    where = os.path.abspath(shutil.which(python) or python)
    if not prefix or not where.startswith(os.path.join(os.path.abspath(prefix), "bin", "")):
        raise UserError(f"`{python}` says its environment is `{prefix}`, but it is not in that environment's bin/",
                        "pass the environment's own interpreter (PREFIX/bin/python), or --prefix PREFIX")
    return Path(prefix)
