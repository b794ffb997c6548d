"""A byte-code proof is kept by the sha256s of the `.pyc` and its source (`bytecode_proof`): the checker must
prove those very bytes. Byte code hashed as bad and swapped for good code before the checker read it (then
put back) would otherwise leave a proof of the bad bytes that every later check on the machine trusts."""

from __future__ import annotations

import hashlib
import marshal
import py_compile
import sys
from pathlib import Path

import pytest

from lockgen.adapters.proof import bytecode_proof


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_pyc_swapped_after_it_was_hashed_keeps_no_proof(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    prefix = tmp_path / "env"
    (prefix / "lib" / "__pycache__").mkdir(parents=True)
    (prefix / "lib" / "foo.py").write_text("x = 1\n")
    pyc = prefix / "lib" / "__pycache__" / f"foo.{sys.implementation.cache_tag}.pyc"
    py_compile.compile(str(prefix / "lib" / "foo.py"), cfile=str(pyc), doraise=True)
    good = pyc.read_bytes()
    pair = [(str(pyc.relative_to(prefix)), "lib/foo.py")]
    pyc.write_bytes(good[:16] + marshal.dumps(compile("x = 2\n", "x", "exec")))  # what the check hashed
    bad = {pair[0][0]: _sha(pyc), "lib/foo.py": _sha(prefix / "lib" / "foo.py")}
    pyc.write_bytes(good)  # swapped back before the checker reads it
    assert bytecode_proof.unproven(prefix, pair, known=bad) == {pair[0][0]: "changed while it was checked"}
    assert not list((tmp_path / "home").rglob(f"*{bad[pair[0][0]]}*"))  # no proof of the bad bytes kept
    pyc.write_bytes(good[:16] + marshal.dumps(compile("x = 2\n", "x", "exec")))  # put back: refused, as it is
    assert bytecode_proof.unproven(prefix, pair) == {pair[0][0]: "not the byte code of its source"}
    pyc.write_bytes(good)
    assert bytecode_proof.unproven(prefix, pair) == {} and list((tmp_path / "home").rglob(f"*{_sha(pyc)}*"))
