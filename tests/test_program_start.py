"""`core.image.program_start` against the owners of the formats: readelf for the PT_INTERP of this host's real ELF
programs, and the kernel itself for `#!` lines (each generated script is executed: the interpreter's argv, or
the kernel's ENOEXEC, is the answer). Arbitrary bytes, cut and damaged programs never raise."""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from lockgen.core.image.program_start import BINPRM_BUF_SIZE, Start, program_start

HOST_PROGRAMS = [Path(p) for p in ("/usr/bin/python3.11", "/bin/ls", "/sbin/ldconfig", "/usr/bin/ldd")]
_INTERP = re.compile(r"\[Requesting program interpreter: (.*)\]")


def _readelf_loader(path: Path) -> str | None:
    """The loader readelf names for an ELF program (None for a static one)."""
    shown = subprocess.run(["readelf", "-lW", str(path)], capture_output=True, text=True, check=True).stdout
    found = _INTERP.search(shown)
    return found.group(1) if found else None


def _host_elves() -> list[Path]:
    """This host's ELF programs of /usr/bin and /usr/sbin (every one, links to them once)."""
    seen: dict[Path, Path] = {}
    for folder in (Path("/usr/bin"), Path("/usr/sbin")):
        for path in sorted(folder.iterdir()):
            real = path.resolve()
            if real.is_file() and os.access(real, os.R_OK) and real.open("rb").read(4) == b"\x7fELF":
                seen.setdefault(real, real)
    return sorted(seen)


def test_every_elf_program_of_this_host_names_the_loader_readelf_names() -> None:
    elves = _host_elves()
    assert len(elves) > 100 and Path("/usr/bin/python3.11") in elves
    kinds = set()
    for path in elves:
        start = program_start(path.read_bytes())
        wanted = _readelf_loader(path)
        assert (start.kind, start.interpreter) == (("loader", wanted) if wanted else ("static", "")), path
        assert start.machine == 62, path  # this host's x86-64 (EM_X86_64)
        kinds.add(start.kind)
    assert kinds == {"loader", "static"}  # ldconfig is static-pie here


def test_the_tests_named_programs() -> None:
    python, ls, ldconfig, ldd = (program_start(path.read_bytes()) for path in HOST_PROGRAMS)
    assert python == ls == Start("loader", "/lib64/ld-linux-x86-64.so.2", machine=62)
    assert ldconfig == Start("static", machine=62)
    assert ldd == Start("script", "/bin/bash")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=600))
def test_arbitrary_bytes_never_raise(data: bytes) -> None:
    for candidate in (data, b"\x7fELF" + data, b"#!" + data):
        start = program_start(candidate)
        assert start.kind in ("loader", "static", "script", "refused")
        assert bool(start.why) == (start.kind == "refused")


@settings(max_examples=200, deadline=None)
@given(
    cut=st.integers(min_value=0, max_value=20_000),
    flips=st.lists(st.tuples(st.integers(0, 2047), st.integers(0, 255)), max_size=4),
)
def test_cut_or_damaged_programs_are_refused_or_read_the_same(cut: int, flips: list[tuple[int, int]]) -> None:
    whole = Path("/bin/ls").read_bytes()
    read = program_start(whole[:cut])
    assert read.kind == "refused" or read == program_start(whole), cut  # a cut never names another loader
    damaged = bytearray(whole[:4096])
    for at, value in flips:
        damaged[at] = value
    assert program_start(bytes(damaged)).kind in ("loader", "static", "script", "refused")


def _elf(
    bits: int,
    order: str,
    machine: int,
    interp: bytes | None,
    *,
    kind: int = 3,
    entsize: int | None = None,
    filesz: int | None = None,
    extra_headers: int = 1,
) -> bytes:
    """An ELF program written from the ELF spec: `extra_headers` PT_LOAD headers, then a PT_INTERP naming
    `interp` (none when None), the name after the headers."""
    word, size, header = ("Q", 56, 64) if bits == 64 else ("I", 32, 52)
    count = extra_headers + (interp is not None)
    start = header + count * size
    ident = b"\x7fELF" + bytes([bits // 32, 1 if order == "<" else 2, 1]) + bytes(9)
    fields = struct.pack(
        order + "HHI" + word * 3 + "IHHHHHH", kind, machine, 1, 0, header, 0, 0, header, entsize or size, count, 0, 0, 0
    )
    headers = b""
    for index in range(count):
        p_type = 3 if interp is not None and index == count - 1 else 1
        length = (filesz if filesz is not None else len(interp or b"") + 1) if p_type == 3 else 0
        if bits == 64:
            headers += struct.pack(order + "IIQQQQQQ", p_type, 4, start if p_type == 3 else 0, 0, 0, length, length, 1)
        else:
            headers += struct.pack(order + "IIIIIIII", p_type, start if p_type == 3 else 0, 0, 0, length, length, 4, 1)
    return ident + fields + headers + (interp + b"\0" if interp is not None else b"")


@pytest.mark.parametrize("bits,order,machine", [(64, "<", 183), (64, ">", 21), (32, "<", 40), (32, ">", 8)])
def test_elf_programs_of_every_class_and_byte_order(bits: int, order: str, machine: int) -> None:
    loader = b"/lib/ld-linux-aarch64.so.1"
    assert program_start(_elf(bits, order, machine, loader, extra_headers=3)) == Start(
        "loader", loader.decode(), machine=machine
    )
    assert program_start(_elf(bits, order, machine, None)) == Start("static", machine=machine)
    assert program_start(_elf(bits, order, machine, loader, kind=1)).why.startswith("is an ELF file of type 1")
    assert "program headers" in program_start(_elf(bits, order, machine, loader, entsize=40)).why
    for filesz in (1, 4097, 900):  # under 2 or over PATH_MAX bytes, or past the end of the file
        assert "PT_INTERP" in program_start(_elf(bits, order, machine, loader, filesz=filesz)).why
    no_nul = _elf(bits, order, machine, loader)[:-1] + b"x"
    assert "PT_INTERP" in program_start(no_nul).why


@pytest.fixture(scope="module")
def argv_printer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A program printing its argv as JSON, at a short path, for scripts to name as their interpreter."""
    printer = tmp_path_factory.mktemp("argv") / "p"
    printer.write_text(f"#!{sys.executable}\nimport json, sys\nprint(json.dumps(sys.argv))\n")
    printer.chmod(0o755)
    return printer


_SPACES = st.text(alphabet=" \t", max_size=4)
_ARGUMENT = st.text(alphabet=st.sampled_from(list("ab- =\t \0\\'\"x")), max_size=300)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    before=_SPACES,
    separator=st.sampled_from(["", " ", "\t", "\0", "  \t"]),
    argument=_ARGUMENT,
    after=_SPACES,
    end=st.sampled_from(["\n", "", "\nexit 3\n"]),
    lead=st.sampled_from([0, 0, 0, 0, 180, 200, 220, 254, 300]),
)
def test_a_hash_bang_line_is_read_as_the_kernel_reads_it(
    tmp_path: Path, argv_printer: Path, before: str, separator: str, argument: str, after: str, end: str, lead: int
) -> None:
    """The oracle is execve: the script is run, and the interpreter it started prints what it was given. `lead`
    spaces before the name move it to the end of the 256 bytes the kernel reads, or past them."""
    head = f"#!{' ' * lead}{before}{argv_printer}{separator}{argument}{after}{end}"
    script = tmp_path / f"s{abs(hash(head)) % 10**9}"
    script.write_bytes(head.encode())
    script.chmod(stat.S_IRWXU)
    start = program_start(head.encode())
    try:
        ran = subprocess.run([str(script)], capture_output=True, text=True, timeout=30)
    except OSError as refused:  # ENOEXEC, or no file at the path the line names (the name ran into the argument)
        event(f"execve: {errno.errorcode[refused.errno or 0]}")
        assert (start.kind, refused.errno) == ("refused", errno.ENOEXEC) or (
            start.kind == "script"
            and start.interpreter != str(argv_printer)
            and refused.errno == errno.ENOENT
            and start.interpreter.startswith(str(argv_printer))
        ), (head, start, refused)
        return
    finally:
        script.unlink()
    event("ran, with an argument" if start.argument is not None else "ran, with none")
    assert start.kind == "script" and start.interpreter == str(argv_printer), (head, start, ran.stderr)
    wanted = [str(argv_printer), *([start.argument] if start.argument is not None else []), str(script)]
    assert json.loads(ran.stdout) == wanted, (head, start)


def test_hash_bang_lines_of_note() -> None:
    assert program_start(b"#!/usr/bin/env  python3 -u  \n") == Start("script", "/usr/bin/env", "python3 -u")
    assert program_start(b"#!/bin/sh") == Start("script", "/bin/sh")
    assert program_start(b"#! \t\n").why == "is a script whose #! line names no interpreter"
    assert "256 bytes" in program_start(b"#!/" + b"a" * BINPRM_BUF_SIZE).why
    assert program_start(b"#!/" + b"a" * 300 + b" x").why == program_start(b"#!/" + b"a" * 300).why
    assert program_start(b"python").why == "is neither an ELF program nor a script with a #! line"


def test_an_environment_path_is_followed_as_the_container_will_follow_it(tmp_path: Path) -> None:
    """`adapters.image.program_files`: links of the tree that will sit at /opt/env, followed from the image's root."""
    from lockgen.adapters.image.program_files import program_file

    tree = tmp_path / "tree"
    (tree / "bin").mkdir(parents=True)
    (tree / "bin" / "python3.11").write_bytes(b"#!/bin/sh\n")
    links = {
        "python": "python3.11",
        "abs": "/opt/env/bin/python3.11",
        "up": "../../../../../opt/env/bin/python",
        "out": "/usr/bin/python3.11",
        "loop": "loop2",
        "loop2": "loop",
        "dir": ".",
        "under": "python3.11/x",
    }
    for name, target in links.items():
        (tree / "bin" / name).symlink_to(target)
    read = {name: program_file(tree, "/opt/env", f"/opt/env/bin/{name}") for name in links}
    assert read["python"] == read["abs"] == read["up"] == ("/opt/env/bin/python3.11", b"#!/bin/sh\n")
    assert read["out"] == ("/usr/bin/python3.11", None)  # outside the environment: the base's to hold
    assert read["loop"][1] is None and read["dir"] == ("/opt/env/bin", None)
    assert read["under"] == ("/opt/env/bin/python3.11/x", None)
    assert program_file(tree, "/opt/env", "/opt/env/bin/absent") == ("/opt/env/bin/absent", None)
    assert program_file(tree, "/opt/env", "/opt/env/bin/./dir/../bin/python") == (
        "/opt/env/bin/python3.11",
        b"#!/bin/sh\n",
    )
