"""Keeps the layer table of the design true: what each layer may import, checked by walking the AST."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
THIRD_PARTY_CORE = {"tomlkit", "pydantic"}
FORBIDDEN_IN_CORE = {"rattler", "subprocess", "socket", "urllib", "http", "torch", "yaml", "typer", "rich", "conda_lock"}


def imports_of(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def modules(folder: str) -> list[Path]:
    return sorted((REPO / folder).rglob("*.py"))


def test_model_imports_only_stdlib_and_pydantic() -> None:
    for path in modules("lockgen/model"):
        for name in imports_of(path):
            top = name.split(".")[0]
            assert top in {"pydantic", "__future__", "typing", "datetime", "re", "lockgen"} and (
                top != "lockgen" or name.startswith("lockgen.model")), f"{path}: {name}"


def test_core_is_pure() -> None:
    for path in modules("lockgen/core"):
        for name in imports_of(path):
            top = name.split(".")[0]
            assert top not in FORBIDDEN_IN_CORE, f"{path}: {name}"
            if top == "lockgen":
                assert name.startswith(("lockgen.model", "lockgen.core", "lockgen.errors")), f"{path}: {name}"


def test_adapters_and_api_never_import_the_cli() -> None:
    for path in modules("lockgen/adapters") + [REPO / "lockgen" / "api.py"]:
        assert not any(n.startswith("lockgen.cli") for n in imports_of(path)), path


def test_verify_needs_only_stdlib_and_torch() -> None:
    import sys

    for path in modules("verify"):
        for name in imports_of(path):
            top = name.split(".")[0]
            assert top in sys.stdlib_module_names or top in {"torch", "verify", "__future__"}, f"{path}: {name}"


def test_every_module_has_a_docstring_and_stays_small() -> None:
    for path in modules("lockgen") + modules("verify"):
        tree = ast.parse(path.read_text())
        assert ast.get_docstring(tree), f"{path} has no module docstring"
        assert len(path.read_text().splitlines()) <= 450, f"{path} is too long"
