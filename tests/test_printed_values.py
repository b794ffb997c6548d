"""What lockgen prints for a person shows a certificate's, a lock's or an image's text as it is, one line per row:
every control character (newline, carriage return, ESC and so every ANSI or OSC sequence), line separator,
direction mark and lone surrogate in it is written as its escape (`model.names.escaped`), in rows (`cert compare`,
`fleet status`, drift), plain lines (`cert verify`, `certs`) and error lines alike; rich markup in it is text; an
error line is cut at `terminal.ERROR_LIMIT`, saying how much went; every `print` of the CLI goes through `ui`. The
machine formats keep their own escaping (`test_fleet_formats.py`: Prometheus, JUnit, NFD, NPD through hypothesis).
Also the two messages that named something else than what the user gave, or failed where the docs say a record
only costs work: `--prefix` a link to nothing, and a conformance record that is a folder."""

from __future__ import annotations

import ast
import io
import json
import re
import sys
import tempfile
import time
from pathlib import Path

import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from lockgen.adapters.proof import prefix_observer
from lockgen.adapters.node.signing import render as canonical
from lockgen.api.certs import check_certificate
from lockgen.api.check import check_lock
from lockgen.api.materialize import materialize
from lockgen.cli import terminal, ui
from lockgen.cli.app import app
from lockgen.core.certificate.cert_formats import npd_status
from lockgen.errors import UserError
from lockgen.model.names import UNSHOWABLE, escaped
from lockgen.model.requests import Prefix
from tests.conftest import REPO, run_cli
from tests.test_export import make_lock

PASSED = REPO / "envs" / "examples" / "h200-system" / "h200-lock-full.cert.json"
INJECTED_ROW = 'lockgen_certificate_passed{arch="sm90"} 1'
# what an attacker who writes a certificate (or names a file) would put in it to drive or fool a terminal
HOSTILE = st.lists(
    st.sampled_from(
        [
            "\n" + INJECTED_ROW,
            "\r",
            "\x1b[2J\x1b[H",  # clear the screen, cursor home
            "\x1b]8;;https://evil.example\x07link\x1b]8;;\x07",  # an OSC 8 hyperlink
            "\x1b]0;title\x1b\\",  # an OSC window title, ST-terminated
            "\x9b31m",  # C1 CSI
            "\u2028",
            "\u202e",  # right-to-left override
            "\u200b",
            "\ud800",
            "[bold red]marked[/]",
            "\x00",
            "\t",
            "plain",
        ]
    )
    | st.text(max_size=6),
    min_size=1,
    max_size=5,
).map("".join)


def _unshowable(text: str) -> list[str]:
    """The characters of `text` no line for a person may carry (a line's own end aside)."""
    return [found.group() for line in text.split("\n") for found in UNSHOWABLE.finditer(line)]


def _certificate(folder: Path, name: str, **changes: object) -> Path:
    """The committed H200 certificate, unsigned, with `changes` applied (`figure`: (group, name, unit) added with
    value 1.0; `gpu`, `arch`, `created` put in their fields; `check`: the first check failed, named and detailed so),
    written canonically as `name`."""
    document = json.loads(PASSED.read_text())
    document["signature"] = None
    body = document["certificate"]
    if "figure" in changes:
        group, figure, unit = changes["figure"]  # type: ignore[misc]
        body["figures"].setdefault(group, {})[figure] = {"unit": unit, "value": changes.get("value", 1.0)}
    if "gpu" in changes:
        body["hardware"]["gpu_names"] = [changes["gpu"]]
    for field in ("arch", "created"):
        if field in changes:
            body[field] = changes[field]
    if "check" in changes:
        body["checks"][0] = {**body["checks"][0], "passed": False, "name": changes["check"], "detail": changes["check"]}
        body["passed"] = False
    path = folder / name
    path.write_text(canonical(document))
    return path


def _figure_rows(path: Path) -> int:
    return sum(len(entries) for entries in json.loads(path.read_text())["certificate"]["figures"].values())


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(blacklist_categories=())))
def test_escaped_is_one_showable_line_and_leaves_plain_text_alone(text: str) -> None:
    shown = escaped(text)
    assert not UNSHOWABLE.search(shown) and len(shown.splitlines()) <= 1
    shown.encode("utf-8")  # no lone surrogate is left for an encoder to fail on
    assert escaped(shown) == shown
    if not UNSHOWABLE.search(text):
        assert shown == text


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(name=HOSTILE, unit=HOSTILE)
def test_cert_compare_prints_one_row_per_figure_whatever_a_figure_is_named(name: str, unit: str) -> None:
    """A figure named `x\\nlockgen_certificate_passed{…} 1` is one row, shown escaped; no ESC, OSC or separator
    reaches the terminal; a figure in one certificate only fails the comparison with one error line."""
    with tempfile.TemporaryDirectory() as folder:
        old = _certificate(Path(folder), "old.cert.json")
        new = _certificate(Path(folder), "new.cert.json", figure=("gemm", name, unit))
        result = CliRunner().invoke(app, ["cert", "compare", str(old), str(new)])
        figures = _figure_rows(new)
    assert result.exit_code == 1, (result.stdout, result.stderr, result.exception)
    rows, numerics = (
        result.stdout.splitlines()[:-1],
        result.stdout.splitlines()[-1],
    )  # the figures, then the numerics line
    assert numerics.startswith("numerics:"), result.stdout
    assert len(rows) == figures and not _unshowable(result.stdout) and not _unshowable(result.stderr)
    assert not any(row.startswith(INJECTED_ROW) for row in rows)
    assert any(row.startswith(f"gemm/{escaped(name)}") for row in rows)
    errors = result.stderr.splitlines()
    assert len(errors) == 3 and errors[1].startswith("error: ") and errors[2].startswith("hint: "), (
        result.stderr
    )  # the note, then error and hint


@pytest.mark.slow
@settings(max_examples=15, deadline=None)
@given(value=HOSTILE)
def test_a_certificate_s_text_is_shown_escaped_by_cert_verify_certs_and_fleet_status(value: str) -> None:
    """Its arch and GPU (`cert verify`, `certs`) and a failed check's name (`fleet status`) each on the one line of
    its certificate, escaped."""
    with tempfile.TemporaryDirectory() as folder:
        certs = Path(folder)
        cert = _certificate(certs, "n1.cert.json", gpu=value, arch=value, check=value)
        said = CliRunner().invoke(app, ["cert", "verify", str(cert)])
        listed = CliRunner().invoke(app, ["certs", str(certs)])
        fleet = CliRunner().invoke(app, ["fleet", "status", str(certs)])
    assert [said.exit_code, listed.exit_code, fleet.exit_code] == [1, 0, 1], (said.stderr, listed.stderr, fleet.stderr)
    for result in (said, listed, fleet):
        assert not _unshowable(result.stdout) and not _unshowable(result.stderr), (result.stdout, result.stderr)
        assert len(result.stdout.splitlines()) == 1 and escaped(value) in result.stdout, result.stdout


def test_a_certificate_s_time_is_shown_escaped_and_fleet_status_refuses_it_by_name(tmp_path: Path) -> None:
    """A time that is not the one rule's (`model.certificate_time`) makes no certificate: `certs` lists it not, `cert
    verify` refuses it and a fleet's status refuses it by its node and file, each naming the time escaped."""
    created = "2026-12-01\n\x1b[2J\u202e"
    path = _certificate(tmp_path, "n1.cert.json", created=created)
    listed = CliRunner().invoke(app, ["certs", str(tmp_path)])
    assert listed.exit_code == 0 and listed.stdout == "", listed.stdout
    refusal = f"is not a lockgen certificate: at certificate.created, `{escaped(created)}` is not YYYY-MM-DDTHH:MM:SSZ "
    verified = CliRunner().invoke(app, ["cert", "verify", str(path)])
    assert verified.exit_code == 1 and refusal in verified.stderr, verified.stderr
    fleet = CliRunner().invoke(app, ["fleet", "status", str(tmp_path)])
    assert fleet.exit_code == 1 and "\x1b" not in fleet.stdout + fleet.stderr, (fleet.stdout, fleet.stderr)
    assert fleet.stdout.startswith(f"REFUSED n1 {path}: `{path}` {refusal}") and fleet.stdout.count("\n") == 1, (
        fleet.stdout
    )  # this certificate refused by its node and file, not the whole status (session 30)


def test_a_node_named_with_escapes_keeps_the_fleet_table_aligned(tmp_path: Path) -> None:
    for node in ("n1", "n\x1b[31m2"):
        _certificate(tmp_path, f"{node}.cert.json")
    result = CliRunner().invoke(app, ["fleet", "status", str(tmp_path)])
    assert result.exit_code == 0, result.stderr
    rows = result.stdout.splitlines()
    assert sorted(row.split()[0] for row in rows) == ["n1", "n\\x1b[31m2"]
    assert len({row.index(row.split()[1]) for row in rows}) == 1  # the second column starts at one place


@pytest.mark.slow
def test_a_file_named_with_a_newline_and_escapes_is_one_drift_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An environment's file names are not lockgen's: `check --prefix` names an extra file as one escaped line."""
    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    lock = make_lock(tmp_path, "1.0")
    prefix, _ = materialize(lock, None, tmp_path / "env", lambda _: None)
    (prefix / f"lib/evil\n{INJECTED_ROW}\x1b[2J\u202e").write_text("x\n")
    done = run_cli("check", "--prefix", str(prefix), env={"LOCKGEN_HOME": str(tmp_path / "home")})
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stdout.splitlines() == [f"extra lib/evil\\n{INJECTED_ROW}\\x1b[2J\\u202e"]
    assert not _unshowable(done.stderr)


def test_progress_and_error_lines_are_escaped(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    ui.progress(f"a line\n{INJECTED_ROW}\x1b]0;x\x07")
    with pytest.raises(typer.Exit):
        ui.fail("bad\x1b[2J\nvalue", "hint\u2028more")
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"a line\\n{INJECTED_ROW}\\x1b]0;x\\x07",
        "error: bad\\x1b[2J\\nvalue",
        "hint: hint\\u2028more",
    ]


def test_an_error_line_is_cut_saying_how_much_went(tmp_path: Path) -> None:
    """A 40,000-character figure name in the error line of `cert compare` (a figure in one certificate only): the
    line keeps its start and its end and says how many characters were cut; the hint too is cut."""
    long_name = "a" * 20_000 + "\x1b" * 4_000 + "z" * 16_000  # 56,000 characters once escaped
    old = _certificate(tmp_path, "old.cert.json")
    new = _certificate(tmp_path, "new.cert.json", figure=("gemm", long_name, "GB/s"))
    result = CliRunner().invoke(app, ["cert", "compare", str(old), str(new)])
    [error] = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert result.exit_code == 1 and len(error) <= len("error: ") + terminal.ERROR_LIMIT + 40, len(error)
    cut = (
        len(escaped(f"1 figures are in one certificate only: gemm/{long_name} (missing from old)"))
        - terminal.ERROR_LIMIT
    )
    assert f"[… {cut:,} characters cut …]" in error
    assert error.startswith("error: 1 figures are in one certificate only: gemm/aaa") and error.endswith(
        "zzz (missing from old)"
    )


def test_an_error_hint_is_cut_too(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(typer.Exit):
        ui.fail("short", "h" * 50_000)
    hint = capsys.readouterr().err.splitlines()[1]
    assert (
        hint.startswith("hint: hhh") and "[… 48,000 characters cut …]" in hint and len(hint) < terminal.ERROR_LIMIT + 40
    )


def test_a_progress_bar_phase_is_text_not_rich_markup(monkeypatch: pytest.MonkeyPatch) -> None:
    """A phase is shown as given: `[/bold]` is no closing tag (rich would raise MarkupError), `[red]` no colour."""
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setattr(sys, "stderr", type("Terminal", (io.StringIO,), {"isatty": lambda self: True})())
    with ui.Meter() as meter:
        meter("[red]read[/bold] \x1b[2J", 0, 2)
        [task] = meter._bar.tasks
        assert meter._bar.columns[0].render(task).plain == "[red]read[/bold] \\x1b[2J"


def test_npd_s_one_line_carries_no_direction_or_invisible_mark() -> None:
    """NPD's message (shown by `kubectl describe node`) keeps its own rule, a space for each character a terminal
    would not show as it is: a right-to-left override in a check's name no longer reorders the line."""
    with tempfile.TemporaryDirectory() as folder:
        cert = _certificate(Path(folder), "n1.cert.json", check="conv\u202e\u200bgnihton\n\x1b[2J")
        body = check_certificate(cert, [], None).certificate
    line = npd_status(body)
    assert "stack/conv  gnihton  [2J" in line and not _unshowable(line), line


def _cli_prints() -> list[str]:
    """Each `print(...)` of lockgen/cli outside terminal.py (the printing functions `ui` and the fast path share) that
    prints anything but constant text, and each `.write(...)` on sys.stdout or sys.stderr there, as `module:line`."""
    found = []
    for module in sorted((REPO / "lockgen" / "cli").glob("*.py")):
        if module.name == "terminal.py":
            continue
        for node in ast.walk(ast.parse(module.read_text())):
            if not isinstance(node, ast.Call):
                continue
            printed = (
                isinstance(node.func, ast.Name)
                and node.func.id == "print"
                and not all(isinstance(a, ast.Constant) for a in node.args)
            )
            written = (
                isinstance(node.func, ast.Attribute)
                and node.func.attr == "write"
                and ast.unparse(node.func.value) in ("sys.stdout", "sys.stderr")
            )
            if printed or written:
                found.append(f"{module.name}:{node.lineno}")
    return found


def test_every_line_the_cli_prints_goes_through_ui() -> None:
    """`say`, `progress` and `fail` escape; `print_json` and `emit` write documents their format escaped."""
    assert _cli_prints() == []


def _settle() -> None:
    time.sleep(prefix_observer.RACY_NS / 1e9 + 0.05)


@pytest.mark.slow
def test_a_conformance_record_that_is_a_folder_costs_work_not_the_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The docs: a record that cannot be read or written counts as none; the check hashes again and passes."""
    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    lock = make_lock(tmp_path, "1.0")
    prefix, _ = materialize(lock, None, tmp_path / "env", lambda _: None)
    _settle()
    assert check_lock(lock, Prefix(prefix)).clean
    records = sorted((tmp_path / "home" / "conformance").iterdir())
    assert {re.sub(r"^[0-9a-f]{64}", "KEY", r.name) for r in records} == {
        "KEY.json",
        "KEY.verdict.json",
        "KEY.read.json",
    }
    for record in records:
        record.unlink()
        record.mkdir()
    for _ in range(2):
        said: list[str] = []
        assert check_lock(lock, Prefix(prefix), progress=said.append).clean
        assert any("hashing" in line for line in said), said
    assert all(record.is_dir() and not list(record.iterdir()) for record in records)  # left as they were
    done = run_cli("check", "--lock", str(lock), "--prefix", str(prefix), env={"LOCKGEN_HOME": str(tmp_path / "home")})
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("target", ["nowhere", "missing/deeper", "loop"])
def test_a_prefix_that_is_a_link_to_nothing_is_named_as_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    """materialize (and unpack, through the same step) names the link the user gave and where it leads, before
    building anything; nothing is made where it leads or beside it."""
    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    lock = make_lock(tmp_path, "1.0")
    link = tmp_path / "out" / "env"
    link.parent.mkdir()
    link.symlink_to(link if target == "loop" else tmp_path / "out" / target)
    with pytest.raises(UserError) as refused:
        materialize(lock, None, link, lambda _: None)
    assert (
        refused.value.message.startswith(f"{link} is a symbolic link to `")
        and "leads to nothing" in refused.value.message
    )
    assert ".tmp" not in refused.value.message
    assert link.is_symlink() and not list(link.parent.glob(".env.tmp*")) and not (tmp_path / "out" / "nowhere").exists()


@pytest.mark.slow
def test_unpack_onto_a_link_to_nothing_names_the_link(tmp_path: Path) -> None:
    lock = make_lock(tmp_path, "1.0")
    env = {"LOCKGEN_HOME": str(tmp_path / "home")}
    archive = tmp_path / "stack.tar"
    assert run_cli("pack", str(lock), "--out", str(archive), env=env).returncode == 0
    link = tmp_path / "env"
    link.symlink_to(tmp_path / "nowhere")
    done = run_cli("unpack", str(archive), "--prefix", str(link), env=env)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    [error] = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert error == f"error: {link} is a symbolic link to `{tmp_path / 'nowhere'}`, which leads to nothing", done.stderr
    assert ".tmp" not in done.stderr and link.is_symlink() and not (tmp_path / "nowhere").exists()
