"""`lockgen fleet status`: node x lock rows from certificate folders, regressions against a node's previous
certificate, `--json`, and `--html` rendered by headless Chromium and read back from the screenshot."""

from __future__ import annotations

import json
import math
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from lockgen.adapters.node.signing import render, rendered, sign
from tests.conftest import REPO, run_cli

H200 = REPO / "envs" / "examples" / "h200-system"


def unsigned_copy(source: Path, target: Path, created: str, scale_gemm: float = 1.0) -> None:
    """A certificate as `lockgen verify` without --key writes it, with its time and bf16 GEMM changed."""
    body = json.loads(source.read_text())["certificate"]
    body["created"] = created
    body["figures"]["gemm"]["bf16"]["value"] *= scale_gemm
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render({"certificate": body}))  # the canonical bytes lockgen writes


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    folder = tmp_path / "fleet"
    unsigned_copy(H200 / "h200-lock-full.cert.json", folder / "week1" / "node-a.cert.json", "2026-11-20T10:00:00Z")
    unsigned_copy(H200 / "h200-lock-full.cert.json", folder / "week2" / "node-a.cert.json", "2026-11-27T10:00:00Z", 0.8)
    unsigned_copy(H200 / "h200-lock-full.cert.json", folder / "week2" / "node-b.cert.json", "2026-11-27T10:05:00Z")
    unsigned_copy(H200 / "degraded-tf32-off.cert.json", folder / "week2" / "node-c.cert.json", "2026-11-27T10:10:00Z")
    return folder


@pytest.mark.slow
def test_status_has_one_row_per_node_and_lock_with_regressions(fleet: Path) -> None:
    done = run_cli("fleet", "status", str(fleet), "--json")
    assert done.returncode == 1, done.stderr  # a node failed
    rows = {row["node"]: row for row in json.loads(done.stdout)["rows"]}
    assert set(rows) == {"node-a", "node-b", "node-c"}
    assert rows["node-a"]["certificates"] == 2 and rows["node-a"]["passed"]
    assert rows["node-a"]["regressions"] == ["gemm/bf16 -20.0%"]
    assert rows["node-b"]["regressions"] == [] and rows["node-b"]["figures"]["bf16 GEMM"]["unit"] == "TFLOP/s"
    assert not rows["node-c"]["passed"] and "performance/gemm_tf32_floor" in rows["node-c"]["failed"]
    assert rows["node-a"]["covers"] == rows["node-b"]["covers"] and rows["node-a"]["covers"].startswith("lock ")
    text = run_cli("fleet", "status", str(fleet))
    assert "node-a" in text.stdout and "REGRESSED" in text.stdout and "FAILED" in text.stdout
    empty = run_cli("fleet", "status", str(fleet / "nothing-here"))
    assert empty.returncode == 1 and empty.stderr.startswith("error: ") and "Traceback" not in empty.stderr


def _png_pixels(path: Path) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB(A) bytes) of a non-interlaced 8-bit PNG, its filters undone."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    position, idat, header = 8, b"", None
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position : position + 8])
        chunk = data[position + 8 : position + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat += chunk
        position += 12 + length
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0
    step = 3 if colour == 2 else 4
    raw, stride, rows, previous = zlib.decompress(idat), width * step, [], bytearray(width * step)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for x in range(stride):
            left = line[x - step] if x >= step else 0
            up, corner = previous[x], previous[x - step] if x >= step else 0
            if kind == 1:
                line[x] = (line[x] + left) & 255
            elif kind == 2:
                line[x] = (line[x] + up) & 255
            elif kind == 3:
                line[x] = (line[x] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                best = min((abs(p - left), 0, left), (abs(p - up), 1, up), (abs(p - corner), 2, corner))[2]
                line[x] = (line[x] + best) & 255
        rows.append(bytes(line))
        previous = line
    return width, step, rows


def _count(rows: list[bytes], step: int, colour: str) -> int:
    want = tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return sum(
        1 for row in rows for x in range(0, len(row), step) if all(abs(row[x + i] - want[i]) <= 6 for i in range(3))
    )


@pytest.mark.slow
def test_the_html_page_renders_the_matrix_and_the_charts_in_chromium(fleet: Path, tmp_path: Path) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.fail("this test renders the page in headless Chromium: apt-get install chromium")
    page = tmp_path / "status.html"
    done = run_cli("fleet", "status", str(fleet), "--html", str(page))
    assert done.returncode == 1 and page.is_file(), done.stderr  # node-c failed: still a page
    html = page.read_text()
    assert "<script" not in html and "http" not in html.split("</style>", 1)[1]  # no script, no external asset
    shot = tmp_path / "shot.png"
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--window-size=1000,1400",
            f"--screenshot={shot}",
            page.as_uri(),
        ],
        capture_output=True,
        timeout=120,
        check=True,
    )
    _, step, rows = _png_pixels(shot)
    from lockgen.core.fleet.fleet_html import COLOURS

    assert _count(rows, step, COLOURS["passed"]) > 1000  # node-b's cell
    assert _count(rows, step, COLOURS["regressed"]) > 1000  # node-a's cell
    assert _count(rows, step, COLOURS["failed"]) > 1000  # node-c's cell
    assert _count(rows, step, "#3b6ea8") > 2000  # the bars of the charts


@pytest.mark.slow
def test_every_certificate_is_verified_where_it_is_shown(tmp_path: Path) -> None:
    """With --key, a certificate whose figure was edited (re-rendered canonically, signature kept), one merely
    re-serialized (other whitespace), an unsigned one and one of another signer are each listed under `refused`
    with its node and reason, never as a row; without --key, changed bytes are still refused, not dropped."""
    key, other = tmp_path / "k", tmp_path / "other"
    assert (
        run_cli("keygen", "--out", str(key)).returncode == 0 and run_cli("keygen", "--out", str(other)).returncode == 0
    )
    folder = tmp_path / "fleet"
    folder.mkdir()
    unsigned_copy(H200 / "h200-lock-full.cert.json", tmp_path / "template.cert.json", "2026-11-27T10:00:00Z")

    def signed(name: str, signer: Path) -> dict:
        body = json.loads((tmp_path / "template.cert.json").read_text())["certificate"]
        document = {"certificate": body, "signature": sign(body, signer)}
        (folder / f"{name}.cert.json").write_text(render(document))
        return document

    signed("good", key)
    forged = signed("forged", key)
    forged["certificate"]["figures"]["gemm"]["bf16"]["value"] = 999.0
    (folder / "forged.cert.json").write_text(render(forged))
    reserialized = signed("reserialized", key)
    (folder / "reserialized.cert.json").write_text(json.dumps(reserialized, indent=1))
    unsigned_copy(H200 / "h200-lock-full.cert.json", folder / "unsigned.cert.json", "2026-11-27T10:00:00Z")
    signed("stranger", other)
    (folder / "broken.cert.json").write_text("{not json")

    checked = run_cli("fleet", "status", str(folder), "--key", f"{key}.pub", "--json")
    report = json.loads(checked.stdout)
    assert checked.returncode == 1 and [row["node"] for row in report["rows"]] == ["good"]
    refused = {entry["node"]: entry["reason"] for entry in report["refused"]}
    assert set(refused) == {"forged", "reserialized", "unsigned", "stranger", "broken"}
    assert "content was changed" in refused["forged"] and "canonical form" in refused["reserialized"]
    assert (
        "not signed" in refused["unsigned"]
        and "no --key given" in refused["stranger"]
        and "not JSON" in refused["broken"]
    )
    both = run_cli("fleet", "status", str(folder), "--key", f"{key}.pub", "--key", f"{other}.pub", "--json")
    assert [row["node"] for row in json.loads(both.stdout)["rows"]] == ["good", "stranger"]
    text = run_cli("fleet", "status", str(folder), "--key", f"{key}.pub")
    assert "REFUSED forged" in text.stdout and "5 certificates refused" in text.stderr
    unchecked = run_cli("fleet", "status", str(folder), "--json")
    report = json.loads(unchecked.stdout)
    assert {entry["node"] for entry in report["refused"]} == {
        "reserialized",
        "broken",
    } and "signatures were not checked" in unchecked.stderr


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=40,
)
STRICT_JSON_VALUES = st.recursive(  # what `--json` may write: strict JSON, no NaN nor infinity (`print_json` refuses)
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None)
@given(document=JSON_VALUES)
def test_the_quick_rendering_is_the_certificate_file_byte_for_byte(document: object) -> None:
    """`signing.rendered` (the fleet's quick proof) against `signing.render` (json's own encoder, what verify writes):
    any JSON document, NaN, infinities, huge integers, control characters and lone surrogates included."""
    assert rendered(document) == render(document)


def _signed_document(key: Path) -> dict:
    body = json.loads((H200 / "h200-lock-full.cert.json").read_text())["certificate"]
    return {"certificate": body, "signature": sign(body, key)}


MUTATIONS = {
    "canonical": lambda document: render(document),
    "indented by one": lambda document: json.dumps(document, sort_keys=True, indent=1, ensure_ascii=True) + "\n",
    "no space after colons": lambda document: (
        json.dumps(document, sort_keys=True, indent=2, ensure_ascii=True, separators=(",", ":")) + "\n"
    ),
    "keys unsorted": lambda document: (
        json.dumps(
            {"signature": document["signature"], "certificate": dict(reversed(document["certificate"].items()))},
            indent=2,
        )
        + "\n"
    ),
    "no final newline": lambda document: render(document)[:-1],
    "a figure changed": lambda document: render(
        {
            **document,
            "certificate": {**document["certificate"], "duration_s": document["certificate"]["duration_s"] + 1},
        }
    ),
    "unsigned": lambda document: render({"certificate": document["certificate"]}),
    "signature malformed": lambda document: render(
        {**document, "signature": {**document["signature"], "algorithm": "rsa"}}
    ),
    "another key id": lambda document: render({**document, "signature": {**document["signature"], "key_id": "0" * 16}}),
    "a key more": lambda document: render({**document, "extra": 1}),
    "passed contradicts its checks": lambda document: render(
        {**document, "certificate": {**document["certificate"], "passed": not document["certificate"]["passed"]}}
    ),
    "an empty list opened": lambda document: render(document).replace(
        '"distributed": null', '"distributed": [\n    ]', 1
    ),
    "deep": lambda document: render(
        {**document, "certificate": {**document["certificate"], "stack": {"x": json.loads("[" * 70 + "]" * 70)}}}
    ),
    "nested past the recursion": lambda document: '{"certificate": {"stack": ' + "[" * 900 + "]" * 900 + "}}\n",
}


@pytest.mark.parametrize("keyed", [True, False])
def test_the_quick_proof_accepts_and_refuses_exactly_what_cert_verify_does(tmp_path: Path, keyed: bool) -> None:
    """Each way a file can differ from what `lockgen verify` wrote: the quick proof (`proven_certificate`, what
    fleet status reads with, `read_signed` when it proves nothing) accepts it exactly when `read_signed` does,
    and never accepts what `read_signed` refuses."""
    from lockgen.api.steps.certificate_proof import loaded_signers
    from lockgen.api.steps.certificate_steps import proven_certificate, read_signed
    from lockgen.errors import LockgenError

    assert run_cli("keygen", "--out", str(tmp_path / "k")).returncode == 0
    keys = loaded_signers([tmp_path / "k.pub"] if keyed else [])
    document = _signed_document(tmp_path / "k")
    for name, mutate in MUTATIONS.items():
        path = tmp_path / f"{name.replace(' ', '-')}.cert.json"
        path.write_text(mutate(document))
        verdicts = []
        for read in (
            lambda: read_signed(path, keys.paths),
            lambda: proven_certificate(path.read_bytes(), keys) or read_signed(path, keys.paths),
        ):
            try:
                verdicts.append(read().model_dump())
            except LockgenError as error:
                verdicts.append(error.message)
        assert verdicts[0] == verdicts[1], name
        assert isinstance(verdicts[0], dict) == (
            name == "canonical" or (not keyed and name in ("unsigned", "another key id", "a figure changed"))
        ), name


def test_a_fleet_is_read_in_shares_of_whole_nodes_and_every_refusal_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nodes shared out among forked children (a share of 20 nodes here, not 500): every node's rows come back once,
    a node's two certificates land in one share (its regression is found), and the refusals of every share are
    listed, none dropped; the paths are sorted in spilled runs (7 here, not 20,000) and a folder given twice is
    read once."""
    import datetime as dt

    from lockgen.api import fleet_status as use_case

    assert run_cli("keygen", "--out", str(tmp_path / "k")).returncode == 0
    document = _signed_document(tmp_path / "k")
    folder = tmp_path / "fleet"
    for node in range(90):
        (folder / f"rack{node % 3}").mkdir(parents=True, exist_ok=True)
        (folder / f"rack{node % 3}" / f"n{node:03d}.cert.json").write_text(
            render(document) if node % 30 else json.dumps(document)
        )
    body = dict(document["certificate"], created="2099-11-28T10:00:00Z")
    body["figures"] = json.loads(json.dumps(body["figures"]))
    body["figures"]["gemm"]["bf16"]["value"] *= 0.5
    (folder / "later" / "n007.cert.json").parent.mkdir()
    (folder / "later" / "n007.cert.json").write_text(
        render({"certificate": body, "signature": sign(body, tmp_path / "k")})
    )
    monkeypatch.setattr(use_case, "NODES_PER_SHARE", 20)
    monkeypatch.setattr(use_case, "PATHS_HELD", 7)  # the paths sorted in runs of 7, spilled and merged
    paths = use_case.SortedSpill(use_case.named_certificate_files(str(folder)), key=use_case._by_node, run=7)
    assert paths.count == 91 and list(paths) == sorted(map(str, folder.rglob("*.cert.json")), key=use_case._by_node)
    paths = use_case.SortedSpill(use_case.named_certificate_files(str(folder)), key=use_case._by_node, run=7)
    shares = use_case._shares(paths, 2)
    assert [held for _, held in shares] == [46, 45]  # n007's two certificates in the first
    report = use_case.fleet_status(  # the folder given twice: each certificate read once
        [str(folder), str(folder)],
        [tmp_path / "k.pub"],
        False,
        0.05,
        None,
        dt.datetime(2100, 1, 1, tzinfo=dt.timezone.utc),  # after n007's certificate of 2099
    )
    assert [row["node"] for row in report["rows"]] == [f"n{node:03d}" for node in range(90) if node % 30]
    assert {entry["node"] for entry in report["refused"]} == {"n000", "n030", "n060"}
    assert all("canonical form" in entry["reason"] for entry in report["refused"])
    [seventh] = [row for row in report["rows"] if row["node"] == "n007"]
    assert seventh["certificates"] == 2 and seventh["regressions"] == ["gemm/bf16 -50.0%"]


def test_a_kept_verdict_is_taken_only_for_the_same_bytes_and_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A certificate's verdict under a key is kept by its bytes' sha256 and the key, and taken on the next run
    (the kept facts are what is shown); a certificate forged or re-serialized after that run is hashed anew and
    refused; a verdict kept under one key is not taken under another; LOCKGEN_REPARSE=1 verifies everything."""
    import datetime as dt
    import hashlib

    from lockgen.adapters.node import kept_verdicts
    from lockgen.api import fleet_status as use_case

    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    assert (
        run_cli("keygen", "--out", str(tmp_path / "k")).returncode == 0
        and run_cli("keygen", "--out", str(tmp_path / "other")).returncode == 0
    )
    document = _signed_document(tmp_path / "k")
    folder = tmp_path / "fleet"
    folder.mkdir()
    for node in ("a", "b", "c"):
        (folder / f"{node}.cert.json").write_text(render(document))
    now = dt.datetime(2026, 12, 2, tzinfo=dt.timezone.utc)

    def status(key: str = "k") -> tuple[dict[str, float], dict[str, str]]:
        report = use_case.fleet_status([str(folder)], [tmp_path / f"{key}.pub"], False, 0.05, None, now)
        return {row["node"]: row["figures"]["bf16 GEMM"]["value"] for row in report["rows"]}, {
            entry["node"]: entry["reason"] for entry in report["refused"]
        }

    figure = document["certificate"]["figures"]["gemm"]["bf16"]["value"]
    assert status() == ({"a": figure, "b": figure, "c": figure}, {})
    sha256 = hashlib.sha256((folder / "a.cert.json").read_bytes()).hexdigest()
    key = hashlib.sha256(_raw_public_key(tmp_path / "k.pub")).hexdigest()
    assert len(list(Path(kept_verdicts.folder()).glob("*.pack"))) == 1  # three verdicts, one file
    facts = kept_verdicts.KeptVerdicts().verdict(sha256, {key})
    assert facts is not None and kept_verdicts.KeptVerdicts().verdict(sha256, {"another key"}) is None
    facts[5]["gemm"]["bf16"]["value"] = 1.5  # marked: the next run shows what was kept, not what it parsed
    shutil.rmtree(kept_verdicts.folder())
    with kept_verdicts.KeptVerdicts() as kept:
        kept.keep(sha256, key, facts)

    forged = json.loads(json.dumps(document))
    forged["certificate"]["figures"]["gemm"]["bf16"]["value"] = 999.0
    (folder / "b.cert.json").write_text(render(forged))  # signature kept: its content was changed
    (folder / "c.cert.json").write_text(json.dumps(document, indent=1))  # the same JSON, other whitespace
    shown, refused = status()
    assert shown == {"a": 1.5} and set(refused) == {"b", "c"}
    assert "content was changed" in refused["b"] and "canonical form" in refused["c"]
    assert status() == (shown, refused)  # refusals are not kept: made again, the same

    assert status("other")[1].keys() == {"a", "b", "c"}  # a verdict kept under k is no verdict under another key
    monkeypatch.setenv("LOCKGEN_REPARSE", "1")
    assert status()[0] == {"a": figure}


def test_a_verdict_kept_under_other_rules_is_no_verdict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A verdict an older lockgen kept (the same version string, other rules: it accepted a figure that is not a
    number, which these rules refuse) is not taken: the certificate is verified again and refused, as `cert verify`
    refuses it. Failed before: kept verdicts were keyed by the version string alone, which the schema's merge did
    not change, so `fleet status` showed a forged figure as passed."""
    import datetime as dt
    import hashlib

    from lockgen import __version__
    from lockgen.adapters.node import kept_verdicts
    from lockgen.api import fleet_status as use_case

    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    assert run_cli("keygen", "--out", str(tmp_path / "k")).returncode == 0
    document = _signed_document(tmp_path / "k")
    body = json.loads(json.dumps(document["certificate"]))
    body["figures"]["gemm"]["bf16"]["value"] = "999"  # text where a number belongs
    forged = {"certificate": body, "signature": sign(body, tmp_path / "k")}
    folder = tmp_path / "fleet"
    folder.mkdir()
    (folder / "a.cert.json").write_text(render(forged))
    now = dt.datetime(2026, 12, 2, tzinfo=dt.timezone.utc)

    def refused() -> dict[str, str]:
        report = use_case.fleet_status([str(folder)], [tmp_path / "k.pub"], False, 0.05, None, now)
        return {entry["node"]: entry["reason"] for entry in report["refused"]}

    assert "a" in refused()  # refused under these rules, and a refusal is never kept
    sha256 = hashlib.sha256((folder / "a.cert.json").read_bytes()).hexdigest()
    key = hashlib.sha256(_raw_public_key(tmp_path / "k.pub")).hexdigest()
    facts_of_a_passed_one = _kept_facts(tmp_path, document, use_case, now)
    older = kept_verdicts.stamp
    monkeypatch.setattr(kept_verdicts, "stamp", lambda: __version__)  # the version alone, as an older one kept
    with kept_verdicts.KeptVerdicts() as kept:
        kept.keep(sha256, key, facts_of_a_passed_one)
    monkeypatch.setattr(kept_verdicts, "stamp", older)
    assert "a" in refused(), "a verdict kept by an older lockgen's rules was taken"


def _kept_facts(tmp_path: Path, document: dict, use_case: object, now: object) -> object:
    """The facts lockgen keeps of an honest certificate (what an older lockgen kept of the forged one)."""
    import hashlib

    from lockgen.adapters.node import kept_verdicts

    folder = tmp_path / "honest"
    folder.mkdir()
    (folder / "h.cert.json").write_text(render(document))
    use_case.fleet_status([str(folder)], [tmp_path / "k.pub"], False, 0.05, None, now)  # type: ignore[attr-defined]
    sha256 = hashlib.sha256((folder / "h.cert.json").read_bytes()).hexdigest()
    key = hashlib.sha256(_raw_public_key(tmp_path / "k.pub")).hexdigest()
    return kept_verdicts.KeptVerdicts().verdict(sha256, {key})


def _raw_public_key(path: Path) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return serialization.load_pem_public_key(path.read_bytes()).public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )


def test_the_page_of_a_large_fleet_stays_small() -> None:
    """Each chart draws the 40 nodes to look at, and says how many more and their range: 10,000 nodes made 9 MB."""
    import datetime as dt

    from lockgen.core.fleet.fleet_html import status_page
    from lockgen.core.fleet.fleet_status import certificate_facts, status_rows
    from lockgen.model.certificate import Certificate

    facts = certificate_facts(
        Certificate.model_validate(json.loads((H200 / "h200-lock-full.cert.json").read_text())).certificate
    )
    rows = status_rows(
        [(f"n{node:04d}", "x", facts) for node in range(2000)],
        dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc),
        0.05,
        {},
    )
    page = status_page(rows, "now", [], [], True)
    assert (
        len(page) < 1_000_000
        and page.count("<rect") <= 40 * 5
        and "the 40 lowest of 2000 nodes; 1960 more from" in page
    )


@settings(max_examples=50, deadline=None)
@given(
    head=st.dictionaries(st.sampled_from(["numerics", "refused"]), STRICT_JSON_VALUES, max_size=2),
    rows=st.lists(STRICT_JSON_VALUES, max_size=4),
)
def test_the_rows_streamed_are_print_json_byte_for_byte(head: dict, rows: list) -> None:
    """`fleet status --json` writes its rows one at a time (100,000 rows were 400 MB of dicts and text at once),
    each given as its JSON text nested two levels (here `signing.rendered_nested`'s of any JSON value; a status
    row's is `StatusRow.json_text`, held to json by its own test): the bytes are `print_json`'s of the report."""
    import contextlib
    import io

    from lockgen.adapters.node.signing import rendered_nested
    from lockgen.cli.terminal import print_json, print_json_texts

    whole, streamed = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(whole):
        print_json({**head, "rows": rows})
    with contextlib.redirect_stdout(streamed):
        print_json_texts(head, "rows", (rendered_nested(row, 2) for row in rows))
    assert streamed.getvalue() == whole.getvalue()


TEXTS = st.text(st.characters(codec=None, exclude_categories=()), max_size=8)  # control characters, lone surrogates
NUMBERS = st.floats() | st.sampled_from([0.0, -0.0, 1e16, 1e-7, 123456789.0, 786.318])


@settings(max_examples=200, deadline=None)
@given(
    texts=st.tuples(TEXTS, TEXTS, TEXTS, TEXTS, TEXTS),
    age_s=st.floats(min_value=0, max_value=1e12) | st.sampled_from([0.0, 59.4, 60.0, 3599.5, 86400.0]),
    passed=st.booleans(),
    failed=st.lists(TEXTS, max_size=3),
    figures=st.dictionaries(TEXTS, st.tuples(NUMBERS, TEXTS), max_size=4),
    regressions=st.lists(TEXTS, max_size=3),
    certificates=st.integers(min_value=0, max_value=10**6),
    refused=st.integers(min_value=0, max_value=10**6),
    depth=st.integers(min_value=0, max_value=3),
)
def test_a_row_s_json_text_is_json_s_own_byte_for_byte(
    texts: tuple[str, str, str, str, str],
    age_s: float,
    passed: bool,
    failed: list[str],
    figures: dict[str, tuple[float, str]],
    regressions: list[str],
    certificates: int,
    refused: int,
    depth: int,
) -> None:
    """`StatusRow.json_text`, what `--json` writes of each row (json's indenting encoder is its pure-Python one: 0.3 s
    of 10,000 rows after the cores' work), is `json.dumps(row.as_json(), indent=2, sort_keys=True)` nested `depth`
    levels, whatever its text (escapes, lone surrogates), numbers (-0.0, 1e16) and empty lists and figures; a NaN or
    an infinity, which strict JSON has not, neither writes (`allow_nan=False`): ValueError."""
    from lockgen.core.fleet.fleet_status import StatusRow

    node, covers, source, created, arch = texts
    row = StatusRow(
        node,
        covers,
        source,
        created,
        age_s,
        arch,
        passed,
        tuple(failed),
        figures,
        tuple(regressions),
        certificates,
        refused,
    )
    try:
        expected = json.dumps(row.as_json(), indent=2, sort_keys=True, allow_nan=False).replace(
            "\n", "\n" + "  " * depth
        )
    except ValueError:
        with pytest.raises(ValueError):
            row.json_text(depth)
        return
    assert row.json_text(depth) == expected


def test_the_walk_finds_what_rglob_finds_as_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`user_files.names_ending` (the fleet's walk: text, no Path per entry) finds what `rglob("*.cert.json")`
    finds, spelled as `str` of rglob's paths: nested and hidden names, a folder named like a certificate (and what
    is in it), a link to a file; a link to a folder under the root is not walked again (it is walked by its real
    path: `test_fleet_status_review` walks a linked folder elsewhere); from ".", a relative and an absolute root."""
    import os

    from lockgen.adapters.user_files import names_ending

    root = tmp_path / "certs"
    for name in ("a.cert.json", "rack1/b.cert.json", "rack1/.c.cert.json", "rack1/deep/d.cert.json", "x.json"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("{}")
    (root / "e.cert.json").mkdir()
    (root / "e.cert.json" / "f.cert.json").write_text("{}")
    os.symlink(root / "rack1", root / "linked")
    os.symlink(root / "a.cert.json", root / "g.cert.json")
    monkeypatch.chdir(tmp_path)
    for folder in (root, Path("certs"), Path("."), Path("certs/rack1")):
        found = list(names_ending(str(folder), ".cert.json"))
        assert sorted(found) == sorted(map(str, folder.rglob("*.cert.json"))) and len(found) == len(set(found))
    assert len(list(names_ending(str(root), ".cert.json"))) == 7
    assert list(names_ending(str(root / "a.cert.json"), ".cert.json")) == []  # a file: nothing under it


@settings(max_examples=200, deadline=None)
@given(records=st.lists(st.tuples(st.integers(0, 5), st.text(max_size=3)), max_size=40), run=st.integers(1, 9))
def test_records_sorted_in_spilled_runs_are_sorted_byte_for_byte(records: list, run: int) -> None:
    """`SortedSpill` (the fleet's paths: runs of `run` sorted, spilled to files, merged) gives `sorted`'s order,
    ties in the order given, and counts the records."""
    from lockgen.adapters.spill_files import SortedSpill

    spilled = SortedSpill(iter(records), key=lambda record: record[0], run=run)
    assert spilled.count == len(records)
    assert list(spilled) == sorted(records, key=lambda record: record[0])


def test_a_kept_verdict_is_read_without_allocating_its_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kept record of a few KiB is read in a buffer of its size (a read of the 1 MiB cap allocated all of it,
    10,000 times a status)."""
    import tracemalloc

    from lockgen.adapters.node import kept_verdicts

    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path))
    monkeypatch.delenv("LOCKGEN_REPARSE", raising=False)
    facts = ["figures"] * 500
    with kept_verdicts.KeptVerdicts() as kept:
        kept.keep("ab" * 32, "key", facts)
    kept = kept_verdicts.KeptVerdicts()
    tracemalloc.start()
    try:
        value = kept.verdict("ab" * 32, {"key"})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert value == facts and peak < kept_verdicts.RECORD_LIMIT // 4, peak


def test_the_fleet_s_numerics_are_named_from_counted_fingerprints_as_from_every_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The comparison holds each distinct fingerprint and stack with its count, the nodes written to files and
    read back only to name the odd ones (shares of 10 nodes here): the same differences, peers and causes as
    `odd_nodes` over every node's certificate held, including a node whose later certificate is the odd one and
    one whose settings differ; and with no odd node the nodes' (node, fingerprint) files are not read at all."""
    import datetime as dt

    from lockgen.adapters.spill_files import SpillFile
    from lockgen.api import fleet_status as use_case
    from tests.test_numerics import odd_nodes
    from lockgen.model.certificate import CertificateBody

    assert run_cli("keygen", "--out", str(tmp_path / "k")).returncode == 0
    template = json.loads((REPO / "envs/examples/numerics-fingerprint/node1-quick.cert.json").read_text())
    folder, latest = tmp_path / "fleet", []

    def write(node: str, created: str, tf32: str | None, settings: dict | None = None) -> CertificateBody:
        body = json.loads(json.dumps(template["certificate"]))
        body["created"] = created
        if tf32 is not None:
            body["numerics"]["digests"]["gemm_tf32"] = tf32
        if settings is not None:
            body["stack"]["settings"] = {**body["stack"]["settings"], **settings}
        path = folder / created[:10] / f"{node}.cert.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render({"certificate": body, "signature": sign(body, tmp_path / "k")}))
        return CertificateBody.model_validate(body)

    for node in range(35):
        name = f"n{node:03d}"
        body = write(name, "2026-11-20T10:00:00Z", "e" * 64 if node in (4, 17) else None)
        if node == 9:
            body = write(name, "2026-11-27T10:00:00Z", "d" * 64, {"NVIDIA_TF32_OVERRIDE": "0"})
        latest.append((name, body))
    monkeypatch.setattr(use_case, "NODES_PER_SHARE", 10)
    now = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
    report = use_case.fleet_status([str(folder)], [tmp_path / "k.pub"], False, 0.05, None, now)
    differ, compared = odd_nodes(latest)
    assert report["numerics"] == {"compared": 35, "differ": [difference.as_json() for difference in differ]}
    assert compared == 35 and [entry["node"] for entry in report["numerics"]["differ"]] == ["n004", "n009", "n017"]
    assert "NVIDIA_TF32_OVERRIDE=0 here" in report["numerics"]["differ"][1]["cause"]

    for odd in ("n004", "n017"):
        (folder / "2026-11-20" / f"{odd}.cert.json").unlink()
    shutil.rmtree(folder / "2026-11-27")
    read: list[int] = []
    real = SpillFile.records
    monkeypatch.setattr(SpillFile, "records", lambda self, count: read.append(count) or real(self, count))
    monkeypatch.setattr(use_case.parallel, "cores", lambda: 1)  # one share, read in this process
    report = use_case.fleet_status([str(folder)], [tmp_path / "k.pub"], False, 0.05, None, now)
    assert report["numerics"] == {"compared": 33, "differ": []}  # n009's first certificate is its latest now
    assert read == [33]  # the share's paths; never its nodes' fingerprints
    assert len(list(report["rows"])) == 33 and read == [33, 33]


def test_kept_verdicts_are_packs_merged_past_their_bound_and_a_damaged_pack_keeps_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each run's verdicts are one pack (not a file each), its index sorted in spilled runs; past MOST_PACKS packs
    they are merged into one and every verdict is still found; a pack cut short, or whose index points outside
    its records, keeps nothing (the certificates are verified again), and a sha256 no pack holds is not kept."""
    from lockgen.adapters.node import kept_verdicts

    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path))
    monkeypatch.delenv("LOCKGEN_REPARSE", raising=False)
    monkeypatch.setattr(kept_verdicts, "ENTRIES_HELD", 2)  # the index sorted in spilled runs of 2, not 20,000
    monkeypatch.setattr(kept_verdicts, "ENTRIES_READ", 2)  # and a merge reads each pack's 2 at a time
    digests = [f"{run:02x}{item:02x}" + "0" * 60 for run in range(kept_verdicts.MOST_PACKS + 1) for item in range(3)]
    for run in range(kept_verdicts.MOST_PACKS + 1):
        with kept_verdicts.KeptVerdicts() as kept:
            for sha256 in digests[3 * run : 3 * run + 3]:
                kept.keep(sha256, "key", [sha256])
        packs = sorted(Path(kept_verdicts.folder()).glob("*.pack"))
        assert len(packs) == (run + 1 if run < kept_verdicts.MOST_PACKS else 1)
    kept = kept_verdicts.KeptVerdicts()
    assert [kept.verdict(sha256, {"key"}) for sha256 in digests] == [[sha256] for sha256 in digests]
    assert kept.verdict("ff" * 32, {"key"}) is None and kept.verdict(digests[0], {"other"}) is None
    kept.close()
    [pack] = packs
    whole = pack.read_bytes()
    pack.write_bytes(whole[:-1])
    assert kept_verdicts.KeptVerdicts().verdict(digests[0], {"key"}) is None
    index_at = struct.unpack("<QQ8s", whole[-24:])[0]
    pack.write_bytes(whole[:index_at] + b"\xff" * (len(whole) - index_at - 24) + whole[-24:])
    assert kept_verdicts.KeptVerdicts().verdict(digests[0], {"key"}) is None


def test_a_merge_drops_the_verdicts_no_run_took_since_the_last(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kept verdicts are bounded: a merge copies from the merged pack only the verdicts a run took (noted in its
    pack) or kept since; a certificate no longer read loses its verdict there. Each pack is made as every atomic
    file is (`atomic_files.temporary_beside`: the umask's mode, no temporary left)."""
    import os

    from lockgen.adapters.atomic_files import UMASK
    from lockgen.adapters.node import kept_verdicts

    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path))
    monkeypatch.delenv("LOCKGEN_REPARSE", raising=False)
    monkeypatch.setattr(kept_verdicts, "MOST_PACKS", 2)
    digests = [f"{item:02x}" + "0" * 62 for item in range(4)]
    for sha256 in digests[:3]:  # three runs, three packs: merged into one
        with kept_verdicts.KeptVerdicts() as kept:
            kept.keep(sha256, "key", [sha256])
    folder = Path(kept_verdicts.folder())
    assert [path.name.startswith("merged-") for path in folder.glob("*.pack")] == [True]
    with kept_verdicts.KeptVerdicts() as kept:  # takes the first verdict, keeps a fourth
        assert kept.verdict(digests[0], {"key"}) == [digests[0]]
        kept.keep(digests[3], "key", [digests[3]])
    with kept_verdicts.KeptVerdicts() as kept:  # takes the first again: three packs, merged
        assert kept.verdict(digests[0], {"key"}) == [digests[0]]
    [pack] = folder.glob("*.pack")
    assert pack.name.startswith("merged-") and pack.stat().st_mode & 0o777 == 0o666 & ~UMASK
    kept = kept_verdicts.KeptVerdicts()
    assert [kept.verdict(sha256, {"key"}) for sha256 in digests] == [[digests[0]], None, None, [digests[3]]]
    kept.close()
    assert not [name for name in os.listdir(folder) if not name.endswith(".pack") and name != kept_verdicts.MERGE_LOCK]


def test_a_merge_that_finds_a_pack_gone_leaves_the_packs_to_the_merge_that_took_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pack listed but gone when opened is another merge's (the two shares of one status closing together):
    this merge stops, leaving every pack, rather than judge the merged pack's verdicts without that one's notes."""
    import os

    from lockgen.adapters.node import kept_verdicts

    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path))
    monkeypatch.delenv("LOCKGEN_REPARSE", raising=False)
    monkeypatch.setattr(kept_verdicts, "MOST_PACKS", 2)
    digests = [f"{item:02x}" + "0" * 62 for item in range(3)]
    listed = os.listdir
    for sha256 in digests:
        if sha256 == digests[-1]:  # the third pack's merge lists a pack that another merge removed meanwhile
            monkeypatch.setattr(kept_verdicts.os, "listdir", lambda where: [*listed(where), "0-gone.pack"])
        with kept_verdicts.KeptVerdicts() as kept:
            kept.keep(sha256, "key", [sha256])
    monkeypatch.setattr(kept_verdicts.os, "listdir", listed)
    assert len(list(Path(kept_verdicts.folder()).glob("*.pack"))) == 3
    kept = kept_verdicts.KeptVerdicts()
    assert [kept.verdict(sha256, {"key"}) for sha256 in digests] == [[sha256] for sha256 in digests]
    kept.close()


def test_a_merge_begun_while_another_removes_its_packs_waits_for_none_and_drops_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two merges at once (the two shares of one status closing together): the second, listing the packs while
    the first removes what it merged, would take the first's new merged pack for an old one and drop its verdicts.
    One merge runs at a time (a lock beside the packs); the other leaves the packs to it."""
    import os

    from lockgen.adapters.node import kept_verdicts

    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path))
    monkeypatch.delenv("LOCKGEN_REPARSE", raising=False)
    monkeypatch.setattr(kept_verdicts, "MOST_PACKS", 100)
    digests = [f"{item:02x}" + "0" * 62 for item in range(10)]
    for sha256 in digests:  # ten packs of one verdict each
        with kept_verdicts.KeptVerdicts() as kept:
            kept.keep(sha256, "key", [sha256])
    folder = kept_verdicts.folder()
    monkeypatch.setattr(kept_verdicts, "MOST_PACKS", 8)
    removed = os.unlink
    calls = []

    def unlink_then_merge_beside(path: str) -> None:
        removed(path)
        calls.append(path)
        if len(calls) == 2:  # another merge lists the folder now: the merged pack and eight of the ten
            kept_verdicts._merge_when_many(folder)

    monkeypatch.setattr(kept_verdicts.os, "unlink", unlink_then_merge_beside)
    kept_verdicts._merge_when_many(folder)
    monkeypatch.setattr(kept_verdicts.os, "unlink", removed)
    kept = kept_verdicts.KeptVerdicts()
    assert [kept.verdict(sha256, {"key"}) for sha256 in digests] == [[sha256] for sha256 in digests]
    kept.close()


def test_failing_nodes_are_counted_and_the_first_five_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fleet's failing rows are counted as they are spilled and only the first five (in node order, across the
    shares) kept for the summary, which names them: the rows themselves list every one."""
    import datetime as dt

    from lockgen.api import fleet_status as use_case

    folder = tmp_path / "fleet"
    for node in range(24):
        source = "degraded-tf32-off" if node % 3 == 1 else "h200-lock-full"
        unsigned_copy(H200 / f"{source}.cert.json", folder / f"n{node:02d}.cert.json", "2026-11-20T10:00:00Z")
    monkeypatch.setattr(use_case, "NODES_PER_SHARE", 10)
    now = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
    report = use_case.fleet_status([str(folder)], [], False, 0.05, None, now)
    failing_rows = [row["node"] for row in report["rows"] if not row["passed"]]
    assert failing_rows == [f"n{node:02d}" for node in range(1, 24, 3)]
    assert report["rows"].failing() == use_case.Failing(8, 0, failing_rows[:5])
    status = run_cli("fleet", "status", str(folder))
    assert status.returncode == 1
    assert "8 of 24 node certificates failed (n01, n04, n07, n10, n13)" in status.stderr


def test_the_cores_take_shares_at_once_a_failed_child_s_are_read_again_and_none_is_left_on_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cores read at once: this process takes shares before it waits for any child (it waited for each
    child first, so a cold status took the two cores' work one after the other); a core kept busy by another
    program takes fewer shares (each core had half of them); the shares a child took are read here again when it
    fails, every row once; and when this process fails (an error, Ctrl-C), the children are ended and waited
    for, not left reading."""
    import datetime as dt
    import os
    import time

    from lockgen.adapters import parallel
    from lockgen.api import fleet_status as use_case

    assert run_cli("keygen", "--out", str(tmp_path / "k")).returncode == 0
    folder = tmp_path / "fleet"
    folder.mkdir()
    text = render(_signed_document(tmp_path / "k"))
    for node in range(40):
        (folder / f"n{node:03d}.cert.json").write_text(text)
    monkeypatch.setattr(use_case, "NODES_PER_SHARE", 20)
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    parent, events, pids = os.getpid(), [], []
    share_rows, data, forked = use_case._share_rows, parallel.Forked.data, parallel.Forked.__init__

    def noted_share(*args: object) -> object:
        if os.getpid() == parent:
            events.append("this process's share")
        return share_rows(*args)  # type: ignore[arg-type]

    def noted_wait(self: parallel.Forked) -> bytes | None:
        events.append("a child waited for")
        return data(self)

    def noted_fork(self: parallel.Forked, work: object) -> None:
        forked(self, work)  # type: ignore[arg-type]
        pids.extend([self._child[0]] if self._child is not None else [])

    monkeypatch.setattr(use_case, "_share_rows", noted_share)
    monkeypatch.setattr(parallel.Forked, "data", noted_wait)
    monkeypatch.setattr(parallel.Forked, "__init__", noted_fork)
    now = dt.datetime(2026, 12, 2, tzinfo=dt.timezone.utc)
    report = use_case.fleet_status([str(folder)], [tmp_path / "k.pub"], False, 0.05, None, now)
    assert [row["node"] for row in report["rows"]] == [f"n{node:03d}" for node in range(40)] and len(pids) == 1
    assert events[0] == "this process's share" and events.index("a child waited for") == len(events) - 1

    def slow_child(*args: object) -> object:
        if os.getpid() != parent:
            time.sleep(1)  # a core another program keeps busy
        return noted_share(*args)

    events.clear()
    monkeypatch.setattr(use_case, "_share_rows", slow_child)
    report = use_case.fleet_status([str(folder)], [tmp_path / "k.pub"], False, 0.05, None, now)
    assert [row["node"] for row in report["rows"]] == [f"n{node:03d}" for node in range(40)]
    assert events.count("this process's share") >= 2 * use_case.SHARES_PER_CORE - 2  # the free core took the most

    def dying_child(*args: object) -> object:
        if os.getpid() != parent:
            os._exit(1)  # the child dies with the share it took
        return share_rows(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(use_case, "_share_rows", dying_child)
    report = use_case.fleet_status([str(folder)], [tmp_path / "k.pub"], False, 0.05, None, now)
    assert [row["node"] for row in report["rows"]] == [f"n{node:03d}" for node in range(40)] and len(pids) == 3

    def failing_share(*args: object) -> object:
        if os.getpid() != parent:
            time.sleep(60)  # a child reading for a minute
        raise RuntimeError("this process's share failed")

    monkeypatch.setattr(use_case, "_share_rows", failing_share)
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="share failed"):
        use_case.fleet_status([str(folder)], [tmp_path / "k.pub"], False, 0.05, None, now)
    assert time.monotonic() - started < 30 and len(pids) == 4
    with pytest.raises(ChildProcessError):  # ended and waited for: no child of this process is left
        os.waitpid(pids[3], os.WNOHANG)


def test_a_temporary_pack_a_stopped_process_left_is_removed_once_its_writer_is_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A share its parent stopped (the status failed or was interrupted) or a killed process leaves its pack's
    temporary file; the next run removes it when its writer is gone and it was not written to for a minute, and
    leaves a live writer's and a fresh one's (session 30's review: 3 of 5 failed runs left one, none was removed)."""
    import os
    import subprocess
    import time

    from lockgen.adapters.node import kept_verdicts

    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    where = Path(kept_verdicts.folder())
    where.mkdir(parents=True)
    ended = subprocess.Popen(["true"])
    ended.wait()  # a pid no process has now
    old = time.time() - 2 * kept_verdicts.STALE_S
    left = {
        "dead, old": (f".{ended.pid}-{'a' * 16}.pack.x1.tmp", old),
        "dead, merged, old": (f".merged-{ended.pid}-{'b' * 16}.pack.x2.tmp", old),
        "dead, fresh": (f".{ended.pid}-{'c' * 16}.pack.x3.tmp", time.time()),
        "alive, old": (f".{os.getpid()}-{'d' * 16}.pack.x4.tmp", old),
        "not a pack's": (f".{ended.pid}-notapack.x5.tmp", old),
        "no pid": (f".{'9' * 20}-{'e' * 16}.pack.x6.tmp", old),  # past any pid (os.kill would overflow)
    }
    for name, mtime in left.values():
        (where / name).write_bytes(b"partial")
        os.utime(where / name, (mtime, mtime))
    kept_verdicts.KeptVerdicts().close()
    assert sorted(path.name for path in where.iterdir()) == sorted(
        left[case][0] for case in ("dead, fresh", "alive, old", "not a pack's", "no pid")
    )


@pytest.mark.parametrize("created", ["\u0000026-12-06T10:51:02Z", "2026-13-45T99:99:99Z", "yesterday"])
def test_a_signed_certificate_whose_time_is_not_lockgen_s_is_refused_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, created: str
) -> None:
    """A certificate signed with the key whose `created` is not YYYY-MM-DDTHH:MM:SSZ cannot be dated in a row: it
    is listed under `refused` with its node and why, and the other nodes are shown (session 30's review: the whole
    status ended with one error line and no row)."""
    import datetime as dt

    from lockgen.api import fleet_status as use_case

    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    assert run_cli("keygen", "--out", str(tmp_path / "k")).returncode == 0
    folder = tmp_path / "fleet"
    folder.mkdir()
    (folder / "good.cert.json").write_text(render(_signed_document(tmp_path / "k")))
    body = {**_signed_document(tmp_path / "k")["certificate"], "created": created}
    (folder / "odd.cert.json").write_text(render({"certificate": body, "signature": sign(body, tmp_path / "k")}))
    now = dt.datetime(2026, 12, 7, tzinfo=dt.timezone.utc)
    report = use_case.fleet_status([str(folder)], [tmp_path / "k.pub"], False, 0.05, None, now)
    assert [row["node"] for row in report["rows"]] == ["good"]
    [refusal] = report["refused"]
    assert refusal["node"] == "odd" and "is not YYYY-MM-DDTHH:MM:SSZ" in refusal["reason"], refusal
    result = run_cli("fleet", "status", str(folder), "--key", str(tmp_path / "k.pub"))
    assert result.returncode == 1 and "REFUSED" in result.stderr + result.stdout and "good" in result.stdout, result


@pytest.mark.slow
def test_the_page_says_what_the_text_says(tmp_path: Path) -> None:
    """The page lists every refused certificate (with its node, file and reason, escaped), the nodes whose numerics
    differ, and, without --key, that signatures were not checked; a node with a refused certificate is a REFUSED
    cell, never a green one (here its newer certificate, edited to say passed); figures near a float's limit draw
    finite bars. One good certificate and nine refused was an all-green page."""
    folder = tmp_path / "fleet"
    unsigned_copy(H200 / "h200-lock-full.cert.json", folder / "good.cert.json", "2026-11-27T10:00:00Z")
    for index in range(8):
        (folder / f"bad{index}<i>.cert.json").write_text("{not json")
    unsigned_copy(H200 / "h200-lock-full.cert.json", folder / "week1" / "n.cert.json", "2026-12-01T10:00:00Z")
    unsigned_copy(H200 / "degraded-tf32-off.cert.json", folder / "week2" / "n.cert.json", "2026-12-07T10:00:00Z")
    edited = json.loads((folder / "week2" / "n.cert.json").read_text())
    edited["certificate"]["passed"] = True
    (folder / "week2" / "n.cert.json").write_text(render(edited))
    page = tmp_path / "status.html"
    done = run_cli("fleet", "status", str(folder), "--html", str(page))
    html = page.read_text()
    assert done.returncode == 1 and "Signatures were not checked" in html, done.stderr
    assert "1 passed, 0 regressed, 0 failed, 1 refused; 9 certificates refused" in html
    assert html.count("<tr><td>bad") == 8 and "bad0&lt;i&gt;.cert.json" in html and "<i>" not in html
    assert "says passed=True while 1 of its checks failed: it was edited" in html
    from lockgen.core.fleet.fleet_html import COLOURS

    assert html.count(f"background:{COLOURS['refused']}") == 1 and html.count(f"background:{COLOURS['passed']}") == 1

    numerics = REPO / "envs" / "examples" / "numerics-fingerprint"
    quick = tmp_path / "quick"
    quick.mkdir()
    for path in numerics.glob("*.cert.json"):
        shutil.copy(path, quick / path.name)
    keyed = run_cli("fleet", "status", str(quick), "--key", str(numerics / "numerics-signing.pub"), "--html", str(page))
    html = page.read_text()
    assert keyed.returncode == 1 and "Signatures were not checked" not in html, keyed.stderr
    assert "<h2>Nodes whose numerics differ</h2>" in html and "<tr><td>node4-tf32-off</td>" in html
    assert "NVIDIA_TF32_OVERRIDE=0 here" in html

    huge = tmp_path / "huge"
    for node in ("x1", "x2"):  # bf16 GEMM about 1.7e308: 520 px times it was a width of inf
        unsigned_copy(H200 / "h200-lock-full.cert.json", huge / f"{node}.cert.json", "2026-12-01T10:00:00Z", 2.2e305)
    assert run_cli("fleet", "status", str(huge), "--html", str(page)).returncode == 0
    html = page.read_text()
    assert all(math.isfinite(float(width)) for width in re.findall(r'width="([^"]*)"', html))
    assert not re.search(r"\b(inf|nan)\b", html)


def test_a_regression_beyond_a_float_s_range_is_said_and_a_refused_certificate_marks_its_node() -> None:
    """A node's bf16 training step from 1e-300 ms to 1e300 ms is a regression too large for a number, said as such
    (it was `-inf%`); the rows of a node with a refused certificate have not passed and say how many."""
    import dataclasses
    import datetime as dt

    from lockgen.core.fleet.fleet_status import certificate_facts, status_rows
    from lockgen.model.certificate import Certificate

    facts = certificate_facts(
        Certificate.model_validate(json.loads((H200 / "h200-lock-full.cert.json").read_text())).certificate
    )

    def stepping(created: str, step: float) -> object:
        figures = json.loads(json.dumps(facts.figures))
        figures["training"]["bf16_step_ms"]["value"] = step
        return dataclasses.replace(facts, created=created, figures=figures)

    older, newer = stepping("2026-12-01T10:00:00Z", 1e-300), stepping("2026-12-02T10:00:00Z", 1e300)
    now = dt.datetime(2026, 12, 3, tzinfo=dt.timezone.utc)
    (row,) = status_rows([("n", "a", older), ("n", "b", newer)], now, 0.05, {})
    assert row.passed and row.refused == 0 and row.regressions == ("training/bf16_step_ms worse, by too much to state",)
    (row,) = status_rows([("n", "a", older), ("n", "b", newer)], now, 0.05, {"n": 2, "other": 1})
    assert not row.passed and row.refused == 2 and json.loads(row.json_text(0))["refused"] == 2
