"""`lockgen fleet status` as a reviewer read it (session 31): a digest measured on some nodes only is said as such,
never blamed on the hardware; a certificate from the future is refused; linked folders are walked, without loops;
`--json` is strict JSON whatever a file's name; the page escapes what the text escapes; a row of a node with a refused
certificate is counted as refused, not failed. Where text is printed, the fast path and the typer app are both
run and say the same bytes (`test_fleet_status_fast`)."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from lockgen.adapters.node.signing import render
from tests.conftest import REPO
from tests.test_fast_path import _lockgen
from tests.test_fleet_status_fast import _ageless

H200 = REPO / "envs" / "examples" / "h200-system"
QUICK = REPO / "envs" / "examples" / "numerics-fingerprint" / "node1-quick.cert.json"
NOW = dt.datetime(2026, 12, 7, 12, tzinfo=dt.timezone.utc)


def _body(source: Path, created: str) -> dict:
    body = json.loads(source.read_text())["certificate"]
    body["created"] = created
    return body


def _write(path: Path, body: dict) -> None:
    """A certificate as `lockgen verify` without --key writes it (the status is run without --key: no signature)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(render({"certificate": body}).encode())


def _status(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    """`lockgen fleet status ARGS` answered by the fast path, after checking the typer app's answer (the same line
    with `--noise 0.05`, a form the fast path leaves to it) is the same bytes and exit code, ages and clocks
    aside."""
    home = tmp_path / "home"
    fast = _lockgen("fleet", "status", *args, home=home)
    typer_app = _lockgen("fleet", "status", *args, "--noise", "0.05", home=home)
    assert _clockless(_ageless(fast[:3])) == _clockless(_ageless(typer_app[:3]))
    return fast[:3]


def _clockless(answer: tuple) -> tuple:
    """An answer with this machine's clock, which a refusal of a certificate from the future names, as `CLOCK`."""
    return tuple(re.sub(r"clock \(\S+Z\)", "clock (CLOCK)", part) if isinstance(part, str) else part for part in answer)


def _use_case(folder: Path, html: Path | None = None, now: dt.datetime = NOW) -> dict:
    from lockgen.api.fleet_status import fleet_status

    return fleet_status([str(folder)], [], False, 0.05, html, now)


@pytest.mark.slow
def test_a_digest_one_node_did_not_measure_is_said_missing_and_never_blamed_on_the_hardware(tmp_path: Path) -> None:
    """Five nodes of one key: three measure gemm_fp8 as `a`, one as `b` (its bits differ: the hardware is
    suspected, as before), one not at all (another lockgen's kernel, or mode): that one is named with the digest it
    did not measure, and a cause that names other software or mode, as `cert compare` says it; `--json` lists it
    under `missing_here`. The vote counted a missing digest as a value that differs, and blamed the hardware."""
    folder = tmp_path / "fleet"
    for index, value in enumerate(("a", "a", "a", "b", None)):
        body = _body(QUICK, "2026-12-06T10:51:02Z")
        if value is None:
            del body["numerics"]["digests"]["gemm_fp8"]
        else:
            body["numerics"]["digests"]["gemm_fp8"] = value * 64
        _write(folder / f"n{index}.cert.json", body)
    code, out, err = _status(tmp_path, str(folder))
    lines = {line.split(":")[0]: line for line in out.splitlines() if line.startswith("NUMERICS")}
    assert code == 1 and set(lines) == {"NUMERICS n3", "NUMERICS n4"}, out + err
    assert "digest gemm_fp8 differs from the 3 other nodes of its key" in lines["NUMERICS n3"]
    assert lines["NUMERICS n3"].endswith("; else the hardware")  # no environment digest: software, else hardware
    missing = lines["NUMERICS n4"]
    assert "digest gemm_fp8 is in the others of its key but was not measured here" in missing, missing
    assert "differs" not in missing and "else the hardware" not in missing
    assert "measured different sets of digests: another lockgen (its kernel) or mode computed them" in missing

    code, out, _ = _status(tmp_path, str(folder), "--json")
    differ = {entry["node"]: entry for entry in json.loads(out)["numerics"]["differ"]}
    assert differ["n4"]["missing_here"] == ["gemm_fp8"] and differ["n4"]["missing_elsewhere"] == []
    assert differ["n3"]["missing_here"] == [] and differ["n3"]["digests"] == ["gemm_fp8"]


def test_a_digest_measured_by_one_of_two_nodes_names_both_sides() -> None:
    """Two nodes, one measuring a digest the other did not (`--quick` against a full run, if they differ): neither
    is a majority, so both are named, each with its side (`missing_elsewhere`, `missing_here`), the cause other
    software or mode; no value is disputed."""
    from tests.test_numerics import _body as numerics_body, _digests, odd_nodes

    full = _digests(1)
    quick = {name: value for name, value in full.items() if name != "gemm_fp8"}
    found, compared = odd_nodes([("full", numerics_body(full)), ("quick", numerics_body(quick))])
    assert compared == 2
    assert [(d.node, d.digests, d.missing_here, d.missing_elsewhere) for d in found] == [
        ("full", ("gemm_fp8",), (), ("gemm_fp8",)),
        ("quick", ("gemm_fp8",), ("gemm_fp8",), ()),
    ]
    assert all("not the hardware" in d.cause for d in found)


@pytest.mark.slow
def test_a_certificate_from_the_future_is_refused_naming_its_time_and_this_clock(tmp_path: Path) -> None:
    """A certificate created in 2099 read "0 s ago" and stayed its node's latest for ever: it is refused, saying its
    time and this machine's clock; a clock up to 5 minutes ahead (skew) is accepted."""
    folder = tmp_path / "fleet"
    _write(folder / "good.cert.json", _body(H200 / "h200-lock-full.cert.json", "2026-11-27T10:00:00Z"))
    _write(folder / "ahead.cert.json", _body(H200 / "h200-lock-full.cert.json", "2099-01-01T00:00:00Z"))
    code, out, err = _status(tmp_path, str(folder))
    [refused] = [line for line in out.splitlines() if line.startswith("REFUSED")]
    assert code == 1 and refused.startswith("REFUSED ahead "), out + err
    assert "it was created 2099-01-01T00:00:00Z, after this machine's clock (20" in refused
    assert "cannot be dated against this clock" in refused and " 0 s ago" not in out

    skewed = tmp_path / "skewed"
    _write(skewed / "n.cert.json", _body(H200 / "h200-lock-full.cert.json", "2026-12-07T12:04:59Z"))
    report = _use_case(skewed)
    assert report["refused"] == [] and [row["age"] for row in report["rows"]] == ["0 s"]
    _write(skewed / "n.cert.json", _body(H200 / "h200-lock-full.cert.json", "2026-12-07T12:05:01Z"))
    [refusal] = _use_case(skewed)["refused"]
    assert "after this machine's clock (2026-12-07T12:00:00Z) by more than 5 min" in refusal["reason"]


@pytest.mark.slow
def test_certificates_under_a_linked_folder_are_read_once_and_links_never_loop(tmp_path: Path) -> None:
    """An NFS layout's `certs/rack1 -> /elsewhere/rack1` was passed over with nothing said: its certificates are
    read; a link to a parent of the folder (or to one walked already) is passed over, so nothing is read twice and
    the walk ends."""
    from lockgen.adapters.user_files import names_ending

    certs, elsewhere = tmp_path / "certs", tmp_path / "elsewhere" / "rack1"
    _write(certs / "a.cert.json", _body(H200 / "h200-lock-full.cert.json", "2026-11-27T10:00:00Z"))
    _write(elsewhere / "deep" / "b.cert.json", _body(H200 / "h200-lock-full.cert.json", "2026-11-27T10:00:00Z"))
    os.symlink(elsewhere, certs / "rack1")
    os.symlink(elsewhere, certs / "rack1-again")  # the same folder: walked once
    os.symlink(tmp_path, elsewhere / "deep" / "up")  # a parent of both: a loop if followed
    os.symlink(certs, certs / "self")
    os.symlink(tmp_path / "gone", certs / "dangling")
    found = sorted(names_ending(str(certs), ".cert.json"))
    assert len(found) == 2 and found[0] == f"{certs}/a.cert.json" and found[1].endswith("/deep/b.cert.json"), found
    code, out, err = _status(tmp_path, str(certs))
    assert code == 0 and [line.split()[0] for line in out.splitlines()] == ["a", "b"], out + err


@pytest.mark.slow
def test_json_is_strict_whatever_the_file_names_and_says_them_as_the_text_does(tmp_path: Path) -> None:
    """A node named by a file name that is not UTF-8 was written as a lone surrogate (`\\udcff`), which strict
    JSON parsers refuse: each such byte is written `\\xff`, in `--json` (its rows and refusals) as in the text and
    the summary."""
    folder = tmp_path / "fleet"
    failing = _body(H200 / "degraded-tf32-off.cert.json", "2026-11-27T10:00:00Z")
    _write(folder / os.fsdecode(b"n\xff.cert.json"), failing)
    (folder / os.fsdecode(b"bad\xfe.cert.json")).write_text("{not json")
    code, out, _ = _status(tmp_path, str(folder), "--json")
    assert code == 1 and not re.search(r"\\ud[89a-f]", out, re.IGNORECASE), out
    report = json.loads(out)
    json.dumps(report, ensure_ascii=False).encode("utf-8")  # no lone surrogate: strict UTF-8 holds it
    assert [row["node"] for row in report["rows"]] == ["n\\xff"]
    assert report["rows"][0]["source"] == f"{folder}/n\\xff.cert.json"
    assert [(entry["node"], entry["source"]) for entry in report["refused"]] == [
        ("bad\\xfe", f"{folder}/bad\\xfe.cert.json")
    ]
    code, out, err = _status(tmp_path, str(folder))
    assert "error: 1 of 1 node certificates failed (n\\xff); 1 certificates refused (bad\\xfe)" in err, err
    assert code == 1 and out.startswith("n\\xff ") and "REFUSED bad\\xfe " in out, out


def test_the_page_escapes_names_as_the_text_does(tmp_path: Path) -> None:
    """A node named with a right-to-left override, another bidi control or a C1 code was written into the page as
    it is (html.escape leaves them): each is its Python escape, as in the text, then HTML-escaped."""
    folder = tmp_path / "fleet"
    name = "n\u202egnp.exe\u2066<b>\x9b"
    _write(folder / f"{name}.cert.json", _body(H200 / "h200-lock-full.cert.json", "2026-11-27T10:00:00Z"))
    (folder / f"{name}2.cert.json").write_text("{not json")
    page = tmp_path / "status.html"
    _use_case(folder, page)
    html = page.read_text()
    assert not re.search("[\u202e\u2066\x80-\x9f]", html)
    assert html.count("n\\u202egnp.exe\\u2066&lt;b&gt;\\x9b") >= 3, html  # its row, its chart's bar, its refusal
    assert "<b>" not in html


@pytest.mark.slow
def test_rows_of_a_node_with_a_refused_certificate_are_counted_refused_not_failed(tmp_path: Path) -> None:
    """The summary said `2 of 3 node certificates failed` of one failed node and one whose certificate was refused:
    it says each by its name (`1 failed, 1 refused of 3`), the exit code still 1; the page counts them apart too."""
    folder = tmp_path / "fleet"
    _write(folder / "good.cert.json", _body(H200 / "h200-lock-full.cert.json", "2026-11-27T10:00:00Z"))
    _write(folder / "slow.cert.json", _body(H200 / "degraded-tf32-off.cert.json", "2026-11-27T10:00:00Z"))
    _write(folder / "week1" / "odd.cert.json", _body(H200 / "h200-lock-full.cert.json", "2026-11-27T10:00:00Z"))
    (folder / "week2").mkdir()
    (folder / "week2" / "odd.cert.json").write_text("{not json")
    for form in ([], ["--json"]):
        code, _, err = _status(tmp_path, str(folder), *form)
        assert code == 1 and "error: 1 failed, 1 refused of 3 node certificates (odd, slow); 1 certificates" in err
    from lockgen.api.fleet_status import Failing

    report = _use_case(folder, tmp_path / "status.html")
    assert report["rows"].failing() == Failing(1, 1, ["odd", "slow"])
    assert "1 passed, 0 regressed, 1 failed, 1 refused" in (tmp_path / "status.html").read_text()


@settings(max_examples=300, deadline=None)
@given(name=st.binary(max_size=12), text=st.text(st.characters(codec=None, exclude_categories=()), max_size=8))
def test_a_name_of_any_bytes_is_strict_text_its_undecodable_bytes_escaped(name: bytes, text: str) -> None:
    """`strict_text` of a file name Python decoded (surrogateescape) is its bytes decoded with each one UTF-8 cannot
    read as `\\xNN`, as `backslashreplace` writes it; of any text, strict UTF-8 holds the result."""
    from lockgen.core.fleet.fleet_status import strict_text

    assert strict_text(os.fsdecode(name)) == name.decode("utf-8", "backslashreplace")
    strict_text(text).encode("utf-8")
