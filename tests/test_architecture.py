"""Keeps the layer table of docs/architecture.md true, by walking every module's imports (ast).

model <- core <- adapters <- api <- cli; `errors` and `digests` are foundations every layer may use;
`verify/` is the kernel that runs inside the environment under test (stdlib and torch only).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FOUNDATIONS = ("lockgen.errors", "lockgen.digests", "lockgen.model")
# the kernel's records of checks and figures, the standard library alone: the one module of verify/ that lockgen
# imports (every layer may: the certificate's schema is defined there once, and the model mirrors it)
CERTIFICATE_SCHEMA = "verify.schema"
FORBIDDEN_IN_CORE = {
    "rattler",
    "subprocess",
    "socket",
    "urllib",
    "http",
    "torch",
    "yaml",
    "typer",
    "rich",
    "conda_lock",
    "os",
    "shutil",
    "tempfile",
    "importlib",
    "zipfile",
    "tarfile",
}  # pathlib: pure path arithmetic
CORE_DATA_LOADER = "lockgen/core/gpu/package_data.py"
API_STEPS = {
    ".".join(path.relative_to(REPO).with_suffix("").parts)
    for path in (REPO / "lockgen" / "api" / "steps").glob("*.py")
    if path.stem != "__init__"
}
STEPS_PACKAGE = "lockgen.api.steps"  # steps below the use cases, not use cases
# api/ wires: the modules that reach the file system's trees, processes, the network, archives and codecs, or an
# outside tool's library, are the adapters' (pathlib and posixpath stay: path arithmetic, and a use case may read
# or write a file it is handed; hashlib and json stay: they compute on bytes already read)
FORBIDDEN_IN_API = {
    "os",
    "shutil",
    "subprocess",
    "socket",
    "ssl",
    "http",
    "urllib",
    "tempfile",
    "fcntl",
    "signal",
    "select",
    "mmap",
    "glob",
    "multiprocessing",
    "ctypes",
    "tarfile",
    "zipfile",
    "gzip",
    "zlib",
    "bz2",
    "lzma",
    "zstandard",
    "importlib",
    "rattler",
    "yaml",
    "conda_lock",
    "torch",
    "typer",
    "rich",
}
CLI_MAY_IMPORT = ("lockgen.api", "lockgen.cli", "lockgen.errors", "lockgen.model")
READING_CALLS = {"open", "read_text", "read_bytes", "write_text", "write_bytes", "iterdir", "glob", "rglob"}


def imports_of(path: Path) -> set[str]:
    """Every absolute module a file imports, at the top or inside functions."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def lockgen_imports(path: Path) -> set[str]:
    return {n for n in imports_of(path) if n.split(".")[0] == "lockgen"}


def modules(folder: str) -> list[Path]:
    return sorted((REPO / folder).rglob("*.py"))


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")


def real_modules(names: set[str]) -> set[str]:
    """Imported names that are modules of the repository (not functions imported from them)."""
    found = set()
    for name in names:
        parts = name.split(".")
        candidate = REPO.joinpath(*parts)
        if candidate.with_suffix(".py").is_file() or (candidate / "__init__.py").is_file():
            found.add(name)
    return found


def violations_of_cli(path: Path) -> list[str]:
    return sorted(n for n in real_modules(lockgen_imports(path)) if n != "lockgen" and not n.startswith(CLI_MAY_IMPORT))


def test_model_imports_only_stdlib_and_pydantic() -> None:
    for path in modules("lockgen/model"):
        for name in imports_of(path):
            top = name.split(".")[0]
            assert (
                top in {"pydantic", "lockgen"} or top in sys.stdlib_module_names or name.startswith(CERTIFICATE_SCHEMA)
            ), f"{path}: {name}"
            assert top != "lockgen" or name.startswith("lockgen.model"), f"{path}: {name}"


def test_core_is_pure() -> None:
    for path in modules("lockgen/core"):
        for name in imports_of(path):
            top = name.split(".")[0]
            if path.relative_to(REPO).as_posix() != CORE_DATA_LOADER:
                assert top not in FORBIDDEN_IN_CORE or name.startswith("urllib.parse"), f"{path}: {name}"
            if top == "lockgen":
                assert name.startswith(("lockgen.core", *FOUNDATIONS)), f"{path}: {name}"
                assert "file_digest" not in name, f"{path}: core does not read files ({name})"


def file_calls(path: Path, names: set[str]) -> list[str]:
    """The calls of a module to any of `names`, a builtin (`open(...)`) or a method (`path.read_text()`), as
    `name:line`: the file reads and writes an import rule cannot see (`open` is a builtin, a `Path` method needs
    no import of its own)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if called in names:
                found.append((node.lineno, f"{called}:{node.lineno}"))
    return [call for _, call in sorted(found)]


def test_core_and_model_read_no_files_except_the_data_loader() -> None:
    """core does no I/O but `core/gpu/package_data.py`, the one loader of lockgen/data; model none at all."""
    for path in modules("lockgen/core") + modules("lockgen/model"):
        if path.relative_to(REPO).as_posix() != CORE_DATA_LOADER:
            assert file_calls(path, READING_CALLS) == [], f"{path}: {file_calls(path, READING_CALLS)} is I/O"


# what a use case may not do itself, though it imports nothing for it: open a file as a stream (builtin `open`,
# `io.open`, `Path.open`) or as text (`read_text`, `write_text`: a decoding by the locale's default). A file it is
# handed is read or written whole, as bytes (`read_bytes`, `write_bytes`), which a digest can be taken of;
# anything more is an adapter's (`adapters/user_files.py` reads a file a user names, to its kind's cap)
OPENING_CALLS = {"open", "read_text", "write_text"}


def test_api_opens_no_file_itself() -> None:
    for path in modules("lockgen/api"):
        assert file_calls(path, OPENING_CALLS) == [], (
            f"{path}: {file_calls(path, OPENING_CALLS)} (move the I/O into an adapter)"
        )


def test_the_file_call_rules_catch_a_planted_open(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        '"""probe"""\n\nimport io\n\ndef conform(path, lock):\n    with open(path) as stream:\n        stream.read()\n'
        "    io.open(path)\n    path.open('rb')\n    text = lock.read_text()\n    lock.write_bytes(b'')\n    "
        "return text.replace('a', 'b')\n"
    )
    assert file_calls(probe, OPENING_CALLS) == ["open:6", "open:8", "open:9", "read_text:10"]
    assert file_calls(probe, READING_CALLS) == ["open:6", "open:8", "open:9", "read_text:10", "write_bytes:11"]


def test_adapters_never_import_api_or_cli() -> None:
    for path in modules("lockgen/adapters"):
        for name in lockgen_imports(path):
            assert not name.startswith(("lockgen.api", "lockgen.cli")), f"{path}: {name}"


def io_imports_of(path: Path) -> list[str]:
    """The I/O modules a module imports (at the top or inside functions), which api/ leaves to adapters."""
    return sorted(
        n for n in imports_of(path) if n.split(".")[0] in FORBIDDEN_IN_API and not n.startswith("urllib.parse")
    )


def test_api_imports_no_io_module() -> None:
    for path in modules("lockgen/api"):
        assert io_imports_of(path) == [], f"{path}: {io_imports_of(path)} (move the I/O into an adapter)"


def test_the_api_io_rule_catches_a_planted_import(tmp_path: Path) -> None:
    """The rule above is not vacuous: a use case that moves files itself, or compresses, is caught."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        '"""probe"""\n\nimport posixpath\nimport hashlib\nfrom urllib.parse import urlsplit\nimport '
        "os.path\n\ndef place():\n    import shutil\n    from gzip import compress\n"
    )
    assert io_imports_of(probe) == ["gzip", "gzip.compress", "os.path", "shutil"]


def test_use_cases_never_import_each_other_or_the_cli() -> None:
    for path in modules("lockgen/api"):
        own = module_name(path)
        for name in real_modules(lockgen_imports(path)):
            assert not name.startswith("lockgen.cli"), f"{path}: {name}"
            if name.startswith("lockgen.api.") and name not in (own, STEPS_PACKAGE):
                assert name in API_STEPS, f"{path}: imports the use case {name} (only steps may be shared)"


def test_cli_imports_only_api_cli_errors_model() -> None:
    for path in modules("lockgen/cli"):
        assert violations_of_cli(path) == [], f"{path}: {violations_of_cli(path)}"


def test_the_cli_rule_catches_an_adapter_import(tmp_path: Path) -> None:
    """The rule above is not vacuous: a CLI module that reaches an adapter is caught."""
    bad = REPO / "lockgen" / "cli" / "_architecture_probe.py"
    try:
        bad.write_text(
            '"""probe"""\n\ndef push():\n    from lockgen.adapters.distribution import registry\n    from '
            "lockgen.adapters.image.oci_layout import read_image\n"
        )
        assert violations_of_cli(bad) == [
            "lockgen.adapters.distribution",
            "lockgen.adapters.distribution.registry",
            "lockgen.adapters.image.oci_layout",
        ]
    finally:
        bad.unlink(missing_ok=True)


def verify_modules_imported(path: Path) -> list[str]:
    """The modules of verify/ a module imports but the certificate schema (lockgen may import that one alone)."""
    imported = {n for n in imports_of(path) if n.split(".")[0] == "verify"}
    return sorted(n for n in real_modules(imported) if n != CERTIFICATE_SCHEMA)


def test_lockgen_imports_only_the_certificate_schema_of_verify() -> None:
    """lockgen reads the kernel's records from `verify.schema`; the kernel's other modules need torch, and
    run in the environment under test, not in lockgen's."""
    for path in modules("lockgen"):
        assert verify_modules_imported(path) == [], f"{path}: {verify_modules_imported(path)}"


def test_the_verify_import_rule_catches_a_kernel_module(tmp_path: Path) -> None:
    bad = tmp_path / "probe.py"
    bad.write_text('"""probe"""\nfrom verify.schema import Figure\nfrom verify.perf import rest\nimport verify\n')
    assert verify_modules_imported(bad) == ["verify", "verify.perf"]


def test_the_certificate_schema_needs_only_the_standard_library() -> None:
    """lockgen imports it on the host, where torch may be missing: no torch, no other module of verify/."""
    for name in imports_of(REPO / "verify" / "schema.py"):
        assert name.split(".")[0] in sys.stdlib_module_names or name == "__future__", name


def test_verify_needs_only_stdlib_and_torch() -> None:
    for path in modules("verify"):
        for name in imports_of(path):
            top = name.split(".")[0]
            assert top in sys.stdlib_module_names or top in {"torch", "verify", "__future__"}, f"{path}: {name}"


@pytest.mark.parametrize("folder", ["lockgen", "verify"])
def test_every_module_has_a_docstring_and_stays_small(folder: str) -> None:
    for path in modules(folder):
        tree = ast.parse(path.read_text())
        assert ast.get_docstring(tree), f"{path} has no module docstring"
        # 450 lines at 200 columns; formatting at 120 spread the same code over 17.7% more lines (lockgen 29,910 ->
        # 35,194), so the bound on what a module holds moved in proportion
        assert len(path.read_text().splitlines()) <= 530, f"{path} is too long"


def test_no_error_message_prints_a_python_list() -> None:
    """`splitlines()[-1:]` and friends inside an f-string print `['...']` to users."""
    for path in modules("lockgen") + modules("verify"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FormattedValue) and isinstance(node.value, ast.Subscript):
                sliced = node.value.value
                lines = isinstance(sliced, ast.Call) and getattr(sliced.func, "attr", "") in {"splitlines", "split"}
                assert not (lines and isinstance(node.value.slice, ast.Slice)), (
                    f"{path}:{node.lineno}: a list in an f-string"
                )


def doc_table(heading: str) -> list[list[str]]:
    """The rows of the first table under `heading` in docs/architecture.md, each a list of its cells."""
    section = (REPO / "docs" / "architecture.md").read_text().split(f"\n{heading}\n", 1)[1]
    table = []
    for line in section.split("\n|", 1)[1].splitlines()[2:]:  # past the header and its rule
        if not line.startswith("|"):
            break
        table.append([cell.strip() for cell in line.strip("|").split("|")])
    return table


def first_names(heading: str) -> set[str]:
    return {row[0].strip("`") for row in doc_table(heading)}


def test_the_architecture_doc_lists_exactly_the_steps_and_use_cases() -> None:
    steps = {name.removeprefix(f"{STEPS_PACKAGE}.") for name in API_STEPS}
    use_cases = {path.stem for path in (REPO / "lockgen" / "api").glob("*.py") if path.stem != "__init__"}
    assert first_names("### Steps") == steps
    assert first_names("### Use cases") == use_cases


def test_every_module_the_feature_table_names_exists() -> None:
    folders = {1: "lockgen/cli", 3: "lockgen/core", 4: "lockgen/adapters"}
    rows = doc_table("## Where each feature lives, and where a new one goes")
    assert len(rows) > 10
    for row in rows:
        for column, folder in folders.items():
            for name in re.findall(r"`([a-z_/]+\.py)`", row[column]):
                path = REPO / folder / name  # `module.py`, or a domain's `domain/module.py`
                if not path.is_file() and "/" in name:
                    path = REPO / "lockgen" / name  # a path from lockgen/ (another layer's module)
                assert path.is_file(), f"{row[0]}: {name} is not in {folder}"
        for step in re.findall(r"`(\w+_steps|pypi)`", row[2]):
            assert f"{STEPS_PACKAGE}.{step}" in API_STEPS, f"{row[0]}: {step}"


LOCK_BUILDER = "lockgen/core/lock/lock_builder.py"


def meta_reads(path: Path) -> list[int]:
    """The lines where a module reads a lock's `lockgen.*` key by its string name (`lock.meta("target")`)."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "meta"
    ]


def test_only_the_lock_builder_reads_lockgen_keys_by_name() -> None:
    """Every other module reads them through `LockgenMeta`, which names each key once beside its writer."""
    for path in modules("lockgen"):
        if path.relative_to(REPO).as_posix() != LOCK_BUILDER:
            assert meta_reads(path) == [], f"{path}: lock.meta(...) outside {LOCK_BUILDER}; use LockgenMeta"


def test_the_meta_rule_catches_a_string_read(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text('"""probe"""\n\ndef arch(lock):\n    return lock.meta("arch")\n')
    assert meta_reads(probe) == [4]


def api_closure(name: str) -> set[str]:
    """The api modules a module of lockgen/api reaches through its imports of other api modules, transitively."""
    seen, pending = set(), [name]
    while pending:  # bounded: each module is entered once
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        path = REPO.joinpath(*current.split(".")).with_suffix(".py")
        pending.extend(
            n
            for n in real_modules(lockgen_imports(path))
            if n.startswith("lockgen.api.") and n not in seen and n != STEPS_PACKAGE
        )
    return seen - {name}


def test_a_plain_environment_build_needs_no_team_step() -> None:
    """shared_steps builds every environment (materialize, check, export): it reaches no team step (issue 32)."""
    assert (
        api_closure("lockgen.api.steps.shared_steps")
        & {"lockgen.api.steps.team_steps", "lockgen.api.steps.held_base_steps"}
        == set()
    )
    assert "lockgen.api.steps.team_steps" in api_closure(
        "lockgen.api.steps.held_base_steps"
    )  # the walk sees steps at all


def _wide_tuples(annotation: ast.expr | None) -> list[str]:
    """The tuples of three or more values (`tuple[int, str, int]`) an annotation names, or a bare `tuple`
    (its arity unsaid), a string annotation read as the expression it holds."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        annotation = ast.parse(annotation.value, mode="eval").body
    if annotation is None:
        return []
    found = []
    for part in ast.walk(annotation):
        if (
            isinstance(part, ast.Subscript)
            and getattr(part.value, "id", "") == "tuple"
            and isinstance(part.slice, ast.Tuple)
            and len(part.slice.elts) >= 3
        ):
            found.append(ast.unparse(part))
    if isinstance(annotation, ast.Name) and annotation.id == "tuple":
        found.append("tuple")
    return found


def positional_records(path: Path) -> list[str]:
    """Parameters and return types of a module's functions, and its type aliases, typed as a tuple of three or
    more values (`layering: tuple[int, str, int]`, `-> tuple[Path, Path, Lock]`, `Plans = list[tuple[Target,
    CudaWindow, list[SolveRequest]]]`): a record whose fields are told apart by position only, where a named type
    (a dataclass, a NamedTuple, a request of `model/requests.py`) says which is which. A tuple of two (a pair, a
    dict key of (target, platform)) and `tuple[X, ...]` stay."""
    found = []
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for arg in node.args.posonlyargs + node.args.args + node.args.kwonlyargs:
                found += [f"{node.name}({arg.arg}: {record})" for record in _wide_tuples(arg.annotation)]
            found += [f"{node.name}() -> {record}" for record in _wide_tuples(node.returns)]
    for node in tree.body:  # aliases: `Name = <a type expression>`, `Name: TypeAlias = ...`
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, (ast.Subscript, ast.BinOp))
        ):
            found += [f"{node.targets[0].id} = {record}" for record in _wide_tuples(node.value)]
        elif (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and ast.unparse(node.annotation).endswith("TypeAlias")
            and node.value is not None
        ):
            found += [f"{node.target.id} = {record}" for record in _wide_tuples(node.value)]
    return found


def test_no_use_case_or_step_takes_or_returns_a_positional_record() -> None:
    """Requests, results and the values steps pass are named types (issue 32: export's `layering` tuple was one;
    issue 46: resolve's per-(target, platform) work, a 6-tuple read by position)."""
    for path in modules("lockgen/api"):
        assert positional_records(path) == [], f"{path}: {positional_records(path)}"


def test_the_positional_record_rule_catches_a_planted_tuple(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        '"""probe"""\n\nfrom typing import TypeAlias\n\n'
        'Plans = list[tuple[str, "int | None", list[str]]]\nPair = tuple[str, str]\nJob: TypeAlias = "tuple[int, '
        'int, int]"\nLIMIT = (1, 2, 3)\n\n'
        "def write(tree, layering: tuple[int, str, int], pair: tuple[str, str],\n          many: tuple[str, "
        '...], read: "tuple[dict, dict, str] | None" = None, job: tuple = ()) -> tuple[Path, Path, int]:\n    '
        "pass\n"
    )
    assert positional_records(probe) == [
        "write(layering: tuple[int, str, int])",
        "write(read: tuple[dict, dict, str])",
        "write(job: tuple)",
        "write() -> tuple[Path, Path, int]",
        "Plans = tuple[str, 'int | None', list[str]]",
        "Job = tuple[int, int, int]",
    ]


def one_of_checks(path: Path) -> list[int]:
    """Lines where a module counts which of --prefix, --python and --image were given (`sum(x is not None for x
    in (prefix, python, image))`, or pairs of flag and value, `(("--prefix", prefix), ("--image", image))`): the
    one-of rule, which `cli/ui.environment` checks once for every command."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Tuple) and len(node.elts) >= 2:
            values = [
                e.elts[1]
                if isinstance(e, ast.Tuple) and len(e.elts) == 2 and isinstance(e.elts[0], ast.Constant)
                else e
                for e in node.elts
            ]  # a (flag, value) pair counts as its value
            names = {getattr(e, "id", None) for e in values}
            if {"prefix", "image"} <= names and names <= {"prefix", "python", "image"}:
                lines.append(node.lineno)
    return sorted(lines)


def test_the_environment_flags_are_counted_in_one_place() -> None:
    """check and verify take a Prefix | Python | Image the CLI built; no use case counts the three flags again."""
    counted = {path.relative_to(REPO).as_posix(): one_of_checks(path) for path in modules("lockgen")}
    assert {path: lines for path, lines in counted.items() if lines} == {}


def test_the_one_of_rule_catches_a_second_count(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        '"""probe"""\n\ndef check(prefix, python, image):\n'
        "    if sum(x is not None for x in (prefix, python, image)) != 1:\n        raise ValueError\n"
        "    return (prefix, image), (python, prefix)\n\ndef slurm(prefix, python, image):\n"
        '    return [f for f, v in (("--python", python), ("--prefix", prefix), ("--image", image)) if v]\n'
    )
    assert one_of_checks(probe) == [4, 6, 9]


INPUT_READERS = {"read_lock", "load_lock", "read_stack", "lock_file.read", "file_digest"}
# the one step that reads each input a use case hands down: the stack (with its base and the base's lock),
# and a team's base locks (one per target, and the one a team lock names)
READS_ITS_INPUT = {
    "lockgen.api.steps.stack_steps": {"read_stack"},
    "lockgen.api.steps.team_steps": {"read_lock", "lock_file.read"},
}


def reader_calls(path: Path) -> list[str]:
    """The calls of a module that read a lock or a stack file (or hash a file by its path), as `name:line`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = (
            f"{func.value.id}.{func.attr}"
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "lock_file"
            else func.attr
            if isinstance(func, ast.Attribute)
            else getattr(func, "id", "")
        )
        if name in INPUT_READERS:
            found.append(f"{name}:{node.lineno}")
    return found


def test_steps_take_the_inputs_their_use_case_read() -> None:
    """Each input is read once per command (issue 32): a use case reads its lock (`read_lock`, or `lock_file.read`
    where only its digest may be needed) and its stack (through `stack_steps`) and hands the value down; no other
    step reads a lock or stack file again, or hashes one by its path."""
    for path in modules("lockgen/api/steps"):
        allowed = READS_ITS_INPUT.get(module_name(path), set())
        wrong = [call for call in reader_calls(path) if call.split(":")[0] not in allowed]
        assert wrong == [], f"{path}: {wrong} (take the LoadedLock, LockBytes or LoadedStack the use case read)"


def test_api_hashes_no_file_by_its_path() -> None:
    """A digest a use case needs is of the bytes it read (`LoadedLock.sha256`, `LockBytes.sha256`): hashing the
    file again by its path is a second read, of a file that may have changed in between."""
    for path in modules("lockgen/api"):
        hashed = [call for call in reader_calls(path) if call.startswith("file_digest:")]
        assert hashed == [], f"{path}: {hashed}"


def test_the_read_once_rules_catch_a_step_that_reads_again(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        '"""probe"""\n\nfrom lockgen.adapters.lock import lock_file\n\ndef conform(lock, lock_path, stack_path):\n'
        "    again = lock_file.read(lock_path)\n    loaded = read_lock(lock_path)\n"
        "    digest = file_digest(lock_path)\n    return stack_file.read_stack(stack_path), lock.sha256\n"
    )
    assert reader_calls(probe) == ["lock_file.read:6", "read_lock:7", "file_digest:8", "read_stack:9"]


STACK_PARSERS = {"parse_stack_text", "extends_of", "stack_document"}
STACK_READER = "lockgen/adapters/lock/stack_file.py"
# who reads a stack: the step resolve, explain and facts check share, and run's detect (which needs no channels)
STACK_READERS = {"lockgen.api.steps.stack_steps", "lockgen.api.run"}


def stack_parses(path: Path) -> list[int]:
    """The lines where a module parses a stack's text itself (`parse_stack_text`, `extends_of`)."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and (getattr(node.func, "id", None) or getattr(node.func, "attr", None)) in STACK_PARSERS
    ]


def reads_stacks(path: Path) -> bool:
    """Whether a module imports the stack reader (`adapters/lock/stack_file.py`)."""
    return any(
        name == "lockgen.adapters.lock.stack_file" or name.startswith("lockgen.adapters.lock.stack_file.")
        for name in imports_of(path)
    )


def test_a_stack_is_read_in_one_place_once() -> None:
    """A stack is read by `adapters/lock/stack_file.read_stack`, once, into a `LoadedStack` (its text, spec, base
    located once, the base's lock): resolve, explain and facts check through `stack_steps`, detect and run in
    `run`; no other module reads a stack file or parses its text again (before issue 32 resolve read the stack
    for its `extends`, then again whole)."""
    readers = {module_name(path) for path in modules("lockgen") if reads_stacks(path)}
    assert readers == STACK_READERS
    for path in modules("lockgen/api") + modules("lockgen/adapters") + modules("lockgen/cli"):
        if path.relative_to(REPO).as_posix() != STACK_READER:
            assert stack_parses(path) == [], f"{path}: {stack_parses(path)} (take the LoadedStack)"


def test_the_stack_rules_catch_a_second_reader_and_a_second_parse(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        '"""probe"""\n\nfrom lockgen.core.stack import spec_parse\n\ndef base_of(path):\n    from '
        "lockgen.adapters.lock.stack_file import read_stack\n    return spec_parse.extends_of(path.read_text())\n"
    )
    assert reads_stacks(probe) and stack_parses(probe) == [7]


def type_check_exemptions(pyproject_text: str) -> list[str]:
    """The modules pyproject.toml exempts from mypy (`ignore_errors = true` in an override)."""
    import tomllib

    overrides = tomllib.loads(pyproject_text).get("tool", {}).get("mypy", {}).get("overrides", [])
    return sorted(
        name
        for entry in overrides
        if entry.get("ignore_errors")
        for name in ([entry["module"]] if isinstance(entry["module"], str) else entry["module"])
    )


def test_every_module_is_type_checked() -> None:
    """Issue 32 emptied the baseline of modules mypy skipped; a module that fails mypy is fixed, not exempted."""
    assert type_check_exemptions((REPO / "pyproject.toml").read_text()) == []


def test_the_type_check_rule_catches_an_exemption() -> None:
    planted = '[[tool.mypy.overrides]]\nmodule = ["lockgen.api.resolve", "verify.train"]\nignore_errors = true\n'
    assert type_check_exemptions(planted) == ["lockgen.api.resolve", "verify.train"]


def test_adapters_and_core_keep_their_modules_in_domains() -> None:
    """A layer keeps at most 20 flat modules (those every domain shares); each domain sub-package has a docstring
    and a row in docs/architecture.md's table of domains naming every module it holds."""
    page = (REPO / "docs" / "architecture.md").read_text()
    for layer in ("adapters", "core"):
        root = REPO / "lockgen" / layer
        flat = sorted(path.stem for path in root.glob("*.py") if path.stem != "__init__")
        assert len(flat) <= 20, f"{layer}/ has {len(flat)} flat modules: move some into a domain"
        for init in sorted(root.glob("*/__init__.py")):
            domain = init.parent.name
            assert ast.get_docstring(ast.parse(init.read_text())), f"{layer}/{domain}/ says nothing of what it owns"
            row = next((line for line in page.splitlines() if line.startswith(f"| `{layer}/{domain}/` |")), None)
            assert row is not None, f"{layer}/{domain}/ has no row in docs/architecture.md"
            for module in sorted(path.stem for path in init.parent.glob("*.py") if path.stem != "__init__"):
                assert f"`{module}.py`" in row, f"{layer}/{domain}/{module}.py is not named in its row"
