"""Entry-point launchers, pure: whether a `bin/NAME` script is exactly what an installer writes for an
entry point `module:attr`. A launcher is derived, not stated by any package, so it is compared with the
installers' own templates rendered for this entry point (pip/distlib, uv, uv's relocatable `/bin/sh`
polyglot, rattler's noarch-python scripts), byte for byte after the interpreter line; the interpreter
line must name a python of the environment itself (`PREFIX/bin/pythonX[.Y]`, or the polyglot's `/bin/sh`).
Anything else (a line added, moved or hidden past the size a launcher has) is not a launcher."""

from __future__ import annotations

import re

LIMIT = 4096  # the templates are a few hundred bytes
_DISTLIB = """# -*- coding: utf-8 -*-
import re
import sys
from {module} import {head}
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit({attr}())
"""
_UV = """# -*- coding: utf-8 -*-
import sys
from {module} import {head}
if __name__ == "__main__":
    if sys.argv[0].endswith("-script.pyw"):
        sys.argv[0] = sys.argv[0][:-11]
    elif sys.argv[0].endswith(".exe"):
        sys.argv[0] = sys.argv[0][:-4]
    sys.exit({attr}())
"""
_RATTLER = """# -*- coding: utf-8 -*-
import re
import sys

from {module} import {head}

if __name__ == '__main__':
\tsys.argv[0] = re.sub(r'(-script\\.pyw?|\\.exe)?$', '', sys.argv[0])
\tsys.exit({attr}())
"""
_RELOCATABLE = re.compile(
    r"""'''exec' "\$\(dirname -- "\$\(realpath -- "\$0"\)"\)"/'python[0-9.]*' "\$0" "\$@"\n' '''\n"""
)
_INTERPRETER = re.compile(r"#!(?P<prefix>/.*)/bin/python(\d+(\.\d+)?)?\n")


def is_launcher(text: str, target: str, prefix: str | None = None) -> bool:
    """Whether `text` is an installer's launcher of `target` (`module:attr`, `module:obj.attr`); with `prefix`,
    its interpreter line must name that environment's python."""
    module, _, attr = target.replace(" ", "").partition(":")
    if not module or not attr or len(text) > LIMIT:
        return False
    first, newline, body = text.partition("\n")
    if not newline:
        return False
    if first == "#!/bin/sh":
        polyglot = _RELOCATABLE.match(body)
        if polyglot is None:
            return False
        body = body[polyglot.end() :]
    else:
        interpreter = _INTERPRETER.fullmatch(first + "\n")
        if interpreter is None or (prefix is not None and interpreter["prefix"] != prefix.rstrip("/")):
            return False
    fields = {"module": module, "head": attr.split(".")[0], "attr": attr}
    return any(body == template.format(**fields) for template in (_DISTLIB, _UV, _RATTLER))
