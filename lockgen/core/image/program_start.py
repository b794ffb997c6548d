"""How the kernel starts a program file, read from its bytes, pure: what export proves an image holds before it
writes one whose Python could not start.

The rules are Linux's `execve`:
- an ELF program (`fs/binfmt_elf.c`, `load_elf_binary`): the magic `\\x7fELF`, a 32- or 64-bit class, little or
  big endian, type `ET_EXEC` or `ET_DYN`, program headers of the class's own size (at least one, at most 64 KiB
  of them) inside the file; the first `PT_INTERP` header names the dynamic loader the kernel maps with it (2 to
  4096 bytes, ending in NUL, inside the file; the name is what comes before the first NUL). An ELF program
  without one starts alone (static, or static-pie);
- a script (`fs/binfmt_script.c`, Linux 5.1 on): `#!` then the interpreter's path and at most one argument, read
  from the first 256 bytes (`BINPRM_BUF_SIZE`); a line longer than that must have the path end (a space, tab or
  NUL) within them, as the kernel refuses a path it would have to cut;
- anything else the kernel refuses (`ENOEXEC`, "exec format error").
The header is read in the class and byte order the file states (a kernel reads its own: a file of another
class is of another machine too), and the machine it is for (`e_machine`) is kept, to be compared with the
platform's."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Literal

BINPRM_BUF_SIZE = 256
PATH_MAX = 4096
PT_INTERP = 3
ET_EXEC, ET_DYN = 2, 3
MACHINES = {"linux-64": 62, "linux-aarch64": 183, "linux-ppc64le": 21}  # EM_X86_64, EM_AARCH64, EM_PPC64
_HEADERS = {1: (0x1C, 0x2A, 32, "I", 4), 2: (0x20, 0x36, 56, "Q", 8)}  # class: e_phoff, e_phentsize, size, word


@dataclass(frozen=True)
class Start:
    """How a program file starts: `kind` "loader" (an ELF program the kernel maps with the dynamic loader at
    `interpreter`), "static" (an ELF program that needs none), "script" (run by the program at `interpreter`,
    its `#!` line, with `argument`, None when the line has none) or "refused" (the kernel cannot start it:
    `why`). `machine`: an ELF program's `e_machine`."""

    kind: Literal["loader", "static", "script", "refused"]
    interpreter: str = ""
    argument: str | None = None
    machine: int = 0
    why: str = ""


def program_start(data: bytes) -> Start:
    """How the kernel starts the program whose file holds `data` (all of it: an ELF program's loader name may lie
    anywhere in the file)."""
    if data[:4] == b"\x7fELF":
        return _elf(data)
    if data[:2] == b"#!":
        return _script(data[:BINPRM_BUF_SIZE].ljust(BINPRM_BUF_SIZE, b"\0"))
    return Start("refused", why="is neither an ELF program nor a script with a #! line")


def _elf(data: bytes) -> Start:
    head = data[:0x40].ljust(0x40, b"\0")  # the kernel reads the header from its zero-filled first 256 bytes
    if head[4] not in _HEADERS or head[5] not in (1, 2):
        return Start("refused", why="is an ELF file of no class or byte order the kernel reads")
    order = "<" if head[5] == 1 else ">"
    at_offset, at_sizes, size, word, width = _HEADERS[head[4]]
    kind, machine = struct.unpack_from(order + "HH", head, 0x10)
    (phoff,) = struct.unpack_from(order + word, head, at_offset)
    phentsize, phnum = struct.unpack_from(order + "HH", head, at_sizes)
    if kind not in (ET_EXEC, ET_DYN):
        return Start(
            "refused", machine=machine, why=f"is an ELF file of type {kind}, not a program (ET_EXEC or ET_DYN)"
        )
    if phentsize != size or not 0 < phnum * size <= 65536 or phoff + phnum * size > len(data):
        return Start("refused", machine=machine, why="is an ELF program whose program headers the kernel cannot read")
    for index in range(phnum):
        header = phoff + index * size
        if struct.unpack_from(order + "I", data, header)[0] != PT_INTERP:
            continue
        (offset,) = struct.unpack_from(order + word, data, header + (8 if width == 8 else 4))
        (filesz,) = struct.unpack_from(order + word, data, header + (32 if width == 8 else 16))
        named = data[offset : offset + filesz] if offset + filesz <= len(data) else b""
        if not 2 <= filesz <= PATH_MAX or len(named) != filesz or named[-1:] != b"\0":
            return Start("refused", machine=machine, why="is an ELF program whose PT_INTERP the kernel cannot read")
        return Start("loader", _text(named.split(b"\0", 1)[0]), machine=machine)
    return Start("static", machine=machine)


def _script(buf: bytes) -> Start:
    """The `#!` line as `load_script` reads it from the first 256 bytes (`buf`, NUL-padded to them)."""

    def spacetab(at: int) -> bool:
        return buf[at] in b" \t"

    def non_spacetab(first: int, last: int) -> int | None:
        return next((at for at in range(first, last + 1) if not spacetab(at)), None)

    def terminator(first: int, last: int) -> int | None:
        return next((at for at in range(first, last + 1) if spacetab(at) or buf[at] == 0), None)

    buf_end = BINPRM_BUF_SIZE - 1
    end = buf.find(b"\n")
    if end < 0:
        name_start = non_spacetab(2, buf_end)
        if name_start is None or terminator(name_start, buf_end) is None:
            return Start("refused", why="is a script whose #! line is longer than the 256 bytes the kernel reads")
        end = buf_end
    while spacetab(end - 1):
        end -= 1
    name = non_spacetab(2, end)
    if name is None or name == end:
        return Start("refused", why="is a script whose #! line names no interpreter")
    separator = terminator(name, end)
    argument = non_spacetab(separator, end) if separator is not None and buf[separator] != 0 else None
    interpreter = buf[name : separator if argument is not None else end].split(b"\0", 1)[0]
    return Start(
        "script", _text(interpreter), _text(buf[argument:end].split(b"\0", 1)[0]) if argument is not None else None
    )


def _text(path: bytes) -> str:
    """A path as text: bytes that are not UTF-8 kept (surrogate escapes), so it names the same file."""
    return path.decode("utf-8", "surrogateescape")
