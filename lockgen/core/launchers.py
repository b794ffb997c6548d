"""Entry-point launchers, pure: whether a `bin/NAME` script is what an installer writes for an entry point
`module:attr` (pip/distlib, uv, uv's relocatable `/bin/sh` polyglot, rattler's noarch-python scripts).
A launcher is derived, not stated by any package, so it is checked by shape: after the interpreter line,
every statement must be one the installers' templates contain, with this entry point's module and
callable; anything else (an added `import`, `os.system(...)`) is not a launcher."""

from __future__ import annotations

_TEMPLATE_LINES = {
    "import re", "import sys",
    "if __name__ == '__main__':", 'if __name__ == "__main__":',
    r"sys.argv[0] = re.sub(r'(-script\.pyw|\.exe)?$', '', sys.argv[0])",
    r"sys.argv[0] = re.sub(r'(-script\.pyw?|\.exe)?$', '', sys.argv[0])",
    'if sys.argv[0].endswith("-script.pyw"):', "sys.argv[0] = sys.argv[0][:-11]",
    'elif sys.argv[0].endswith(".exe"):', "sys.argv[0] = sys.argv[0][:-4]",
    "' '''",
}
_RELOCATABLE_EXEC = """'''exec' "$(dirname -- "$(realpath -- "$0")")"/'"""


def is_launcher(text: str, target: str) -> bool:
    """Whether `text` launches `target` (`module:attr`, `module:obj.attr`) and does nothing else."""
    module, _, attr = target.replace(" ", "").partition(":")
    if not module or not text.startswith("#!"):
        return False
    head = attr.split(".")[0] if attr else module
    wanted = {f"from {module} import {head}", f"sys.exit({attr}())"} if attr else {f"import {module}", f"sys.exit({module}())"}
    seen: set[str] = set()
    for line in text.splitlines()[1:]:
        statement = line.strip()
        if not statement or statement.startswith("#"):
            continue
        if statement.startswith(_RELOCATABLE_EXEC) and statement.endswith('"$0" "$@"'):
            continue
        if statement not in _TEMPLATE_LINES and statement not in wanted:
            return False
        seen.add(statement)
    return wanted <= seen
