"""Bad input into the conformance commands: any bytes as an inventory or a manifests bundle is one
`error:` line with a hint (exit 1), never a traceback; launchers are judged by shape, whatever the text."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from lockgen.adapters.proof.manifest_store import read_bundle
from lockgen.adapters.node import inventory_file
from lockgen.core.image.launchers import is_launcher
from lockgen.errors import UserError
from tests.conftest import run_cli


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=400), st.booleans(), st.sampled_from([b"", b"\x1f\x8b", b"\x1f\x8b\x08\x00"]))
def test_any_bytes_as_inventory_or_bundle_are_a_user_error(
    tmp_path_factory, data: bytes, zipped: bool, magic: bytes
) -> None:
    """`magic`: bytes that start as gzip does and are not gzip (a cut or damaged download)."""
    path = tmp_path_factory.mktemp("bad") / "input.json"
    path.write_bytes(gzip.compress(data) if zipped else magic + data)
    for reader in (inventory_file.read, read_bundle):
        try:
            reader(path)
        except UserError as exc:
            assert exc.message and exc.hint and "\n" not in exc.message
        else:  # only a real document parses, and random bytes are none
            raise AssertionError(f"{reader.__name__} accepted {data!r}")


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300), st.from_regex(r"[a-z_]{1,8}(\.[a-z_]{1,8}){0,2}:[a-z_]{1,8}", fullmatch=True))
def test_launcher_shape_never_raises_and_needs_the_call(text: str, target: str) -> None:
    verdict = is_launcher(text, target)
    assert verdict is False or f"sys.exit({target.split(':')[1]}())" in text


@pytest.mark.slow
def test_pin_and_check_refuse_garbage_cleanly(tmp_path: Path) -> None:
    garbage = tmp_path / "inv.json"
    garbage.write_text("{not json")
    pinned = run_cli("pin", str(garbage), "--target", "x", "--out", str(tmp_path / "x.conda-lock.yml"))
    assert pinned.returncode == 1 and pinned.stderr.startswith("error:") and "hint:" in pinned.stderr
    assert "Traceback" not in pinned.stderr and not (tmp_path / "x.conda-lock.yml").exists()
    lock = tmp_path / "l.conda-lock.yml"
    lock.write_text("version: 1\n")
    checked = run_cli("check", "--lock", str(lock), "--prefix", str(tmp_path), "--manifests", str(garbage))
    assert checked.returncode == 1 and checked.stderr.startswith("error:") and "Traceback" not in checked.stderr
    usage = run_cli("check", "--lock", str(lock))
    assert usage.returncode == 1 and "exactly one of --prefix, --python and --image" in usage.stderr
