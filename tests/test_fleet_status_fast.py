"""`lockgen fleet status FOLDER... [--key PUB]... [--json]` answered by the fast path (`cli/fast_path.py`): no
typer, click or app command module imported, and every byte of stdout and stderr and the exit code the typer
app's (`--noise 0.05`, the default said aloud, is a form the fast path leaves to the app, so the same command line
with it is the typer app's answer); every other form, and an error before anything is said, left to the app."""

from __future__ import annotations

import errno
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lockgen.adapters.node.signing import keygen, render, signed_file
from lockgen.cli import fast_path
from lockgen.cli.fast_path import _read_fleet_status
from tests.conftest import REPO
from tests.test_fast_path import _lockgen

H200 = REPO / "envs" / "examples" / "h200-system"
NUMERICS = REPO / "envs" / "examples" / "numerics-fingerprint"
TYPER_ONLY = ("typer", "click", "lockgen.cli.app", "lockgen.cli.ui", "lockgen.cli.fleet_cmd")


@pytest.fixture(scope="module")
def fleets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    """Two folders of certificates, each with the public key they are signed by: `fleet`, two passing nodes, a
    failing one (TF32 off) and one whose figure was edited after signing; `numerics`, the committed quick
    certificates of one key, one of which computes different bits (a NUMERICS line)."""
    root = tmp_path_factory.mktemp("fleet-fast")
    private, public = keygen(root / "k")
    fleet = root / "fleet"
    fleet.mkdir()
    for node, source, created in (
        ("node-a", "h200-lock-full", "2026-11-20T10:00:00Z"),
        ("node-b", "h200-lock-full", "2026-11-27T10:05:00Z"),
        ("node-c", "degraded-tf32-off", "2026-11-27T10:10:00Z"),
        ("forged", "h200-lock-full", "2026-11-27T10:15:00Z"),
    ):
        body = json.loads((H200 / f"{source}.cert.json").read_text())["certificate"]
        body["created"] = created
        text = signed_file(body, private)
        if node == "forged":  # re-rendered canonically, its signature kept: the content was changed
            document = json.loads(text)
            document["certificate"]["figures"]["gemm"]["bf16"]["value"] = 999.0
            text = render(document)
        (fleet / f"{node}.cert.json").write_text(text)
    numerics = root / "numerics"
    numerics.mkdir()
    for path in NUMERICS.glob("*.cert.json"):
        shutil.copy(path, numerics / path.name)
    return {"fleet": (fleet, public), "numerics": (numerics, NUMERICS / "numerics-signing.pub")}


def _ageless(answer: tuple) -> tuple:
    """An answer with each row's age (seconds apart between two runs) as `AGE`."""
    patterns = (
        (r'"age_s": \d+', '"age_s": AGE'),
        (r'"age": "[^"]*"', '"age": "AGE"'),
        (r" *\d+ (?:d|h|min|s) ago", " AGE"),
    )
    masked = []
    for part in answer:
        for pattern, replacement in patterns if isinstance(part, str) else ():
            part = re.sub(pattern, replacement, part)
        masked.append(part)
    return tuple(masked)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["fleet", "numerics"])
@pytest.mark.parametrize("keyed", [True, False])
@pytest.mark.parametrize("as_json", [True, False])
def test_fleet_status_is_answered_before_typer_as_the_typer_app(
    fleets: dict[str, tuple[Path, Path]], tmp_path: Path, name: str, keyed: bool, as_json: bool
) -> None:
    """A failing node, an edited certificate (refused with a key and without), a node whose numerics differ:
    the same rows, REFUSED and NUMERICS lines, error and hint, and exit code 1, with and without --key and --json
    (the options between the folders, as the typer app reads them too)."""
    folder, public = fleets[name]
    line = [
        "fleet",
        "status",
        *(["--key", str(public)] if keyed else []),
        str(folder),
        *(["--json"] if as_json else []),
    ]
    home = tmp_path / "home"
    fast = _lockgen(*line, home=home, importtime=True)
    typer_app = _lockgen(*line, "--noise", "0.05", home=home, importtime=True)
    assert not set(TYPER_ONLY) & set(fast[3].split()), fast[2]
    assert "typer" in typer_app[3].split()
    assert _ageless(fast[:3]) == _ageless(typer_app[:3])
    assert fast[0] == 1 and ("signatures were not checked" in fast[2]) != keyed and "\nerror: " in f"\n{fast[2]}"
    refused = ["forged"] if name == "fleet" and keyed else []  # changed bytes: a key tells, nothing else can
    failing = ["node-c"] if name == "fleet" else ["node4-tf32-off"]  # TF32 off: a check fails, and its bits differ
    if as_json:
        report = json.loads(fast[1])
        assert [entry["node"] for entry in report["refused"]] == refused
        assert [row["node"] for row in report["rows"] if not row["passed"]] == failing
        assert [entry["node"] for entry in report["numerics"]["differ"]] == (failing if name == "numerics" else [])
    else:
        assert [line.split()[1] for line in fast[1].splitlines() if line.startswith("REFUSED")] == refused
        assert [line.split()[0] for line in fast[1].splitlines() if " FAILED " in line] == failing
        assert [line.split()[1] for line in fast[1].splitlines() if line.startswith("NUMERICS")] == (
            [f"{failing[0]}:"] if name == "numerics" else []
        )


@pytest.mark.slow
def test_a_passing_fleet_and_a_missing_folder_answer_as_the_typer_app(
    fleets: dict[str, tuple[Path, Path]], tmp_path: Path
) -> None:
    """A fleet that passes exits 0 on the fast path; a folder that does not exist is the typer app's to word (the
    fast path, having said nothing, hands it over): the same error either way."""
    folder, public = fleets["fleet"]
    passing = tmp_path / "passing"
    passing.mkdir()
    shutil.copy(folder / "node-b.cert.json", passing / "node-b.cert.json")
    home = tmp_path / "home"
    for extra in ([], ["--json"]):
        line = ["fleet", "status", str(passing), "--key", str(public), *extra]
        fast = _lockgen(*line, home=home, importtime=True)
        assert "typer" not in fast[3].split() and fast[0] == 0 and fast[2] == "", fast
        assert _ageless(fast[:3]) == _ageless(_lockgen(*line, "--noise", "0.05", home=home)[:3])
    missing = ["fleet", "status", str(passing), str(tmp_path / "no-such-folder"), "--key", str(public)]
    handed = _lockgen(*missing, home=home, importtime=True)
    assert "typer" in handed[3].split()  # worded by the typer app
    assert handed[:3] == _lockgen(*missing, "--noise", "0.05", home=home)[:3]
    assert handed[0] == 1 and handed[1] == "" and handed[2].startswith("error: `") and "neither a folder" in handed[2]


@pytest.mark.slow
def test_a_reader_that_leaves_ends_the_status_as_it_ends_the_typer_app(
    fleets: dict[str, tuple[Path, Path]], tmp_path: Path
) -> None:
    """`fleet status FOLDER | head` of a fleet with a failing node: the reader leaves, the status ends quietly with
    exit 1 on the fast path as click ends the typer app (never 0, which would read as a passing fleet in a
    pipeline with pipefail). Unbuffered, so the first row meets the closed pipe inside the command."""
    folder, public = fleets["fleet"]
    home = tmp_path / "home"
    ends = []
    for extra in ([], ["--noise", "0.05"]):  # the fast path, then the typer app
        process = subprocess.Popen(
            [sys.executable, "-m", "lockgen", "fleet", "status", str(folder), "--key", str(public), *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "LOCKGEN_HOME": str(home), "PYTHONUNBUFFERED": "1", "NO_COLOR": "1"},
        )
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()  # the reader leaves before the first row
        ends.append((process.wait(timeout=120), process.stderr.read().decode()))
    assert ends[0] == ends[1] and ends[0][0] == 1, ends
    assert "Traceback" not in ends[0][1] and "Exception ignored" not in ends[0][1], ends


def test_an_error_before_anything_is_said_goes_to_the_typer_app_and_one_after_is_worded_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from lockgen.api import fleet_status as use_case

    assert fast_path.answered(["fleet", "status", str(tmp_path / "none")]) is None  # the use case's own refusal
    empty = tmp_path / "empty"
    empty.mkdir()
    assert fast_path.answered(["fleet", "status", str(empty), "--json"]) is None  # no certificates in it
    assert capsys.readouterr() == ("", "")

    def said_then_broken(*args: object) -> None:
        args[-1]("wrote something")  # type: ignore[operator]
        raise RuntimeError("a bug after a line was said")

    monkeypatch.setattr(use_case, "fleet_status", said_then_broken)
    assert fast_path.answered(["fleet", "status", str(empty)]) == 3
    assert capsys.readouterr() == (
        "",
        "wrote something\nerror: unexpected RuntimeError: a bug after a line was said\nhint: re-run with -v and "
        "report the traceback\n",
    )

    class BrokenRows:  # the report returned, its rows failing as they are read back: printed here, so worded here
        def json_texts(self, depth: int) -> Iterator[str]:
            yield from ()
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(
        use_case, "fleet_status", lambda *_: {"rows": BrokenRows(), "refused": [], "numerics": {"compared": 0}}
    )
    assert fast_path.answered(["fleet", "status", str(empty), "--json", "--key", "k.pub"]) == 1
    out, err = capsys.readouterr()
    assert err.startswith("error: the disk is full") and out.startswith("{")


def test_the_fast_path_passes_what_the_typer_command_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The folders as given, each key as a Path, not --insecure, --noise's default, no page, a time and the
    progress line: what `fleet_cmd.status` passes."""
    from lockgen.api import fleet_status as use_case
    from lockgen.cli import fleet_cmd

    calls: list[tuple] = []
    monkeypatch.setattr(use_case, "fleet_status", lambda *args: calls.append(args) or 1 / 0)
    assert fast_path.answered(["fleet", "status", "a", "--key", "k.pub", "b", "--key", "j.pub"]) is None
    sources, keys, insecure, noise, html, now, _ = calls[0]
    assert (sources, keys, insecure, html) == (["a", "b"], [Path("k.pub"), Path("j.pub")], False, None)
    typer_defaults = {
        name: value.default.default for name, value in inspect.signature(fleet_cmd.status).parameters.items()
    }
    assert noise == typer_defaults["noise"] and insecure == typer_defaults["insecure"]
    assert now.tzinfo is not None and capsys.readouterr() == ("", "")


def test_fleet_status_forms_the_fast_path_reads() -> None:
    assert _read_fleet_status(["d"]) == (["d"], [], False)
    assert _read_fleet_status(["--json", "d", "--key", "a.pub", "e", "--key", "b.pub"]) == (
        ["d", "e"],
        ["a.pub", "b.pub"],
        True,
    )


@pytest.mark.parametrize(
    "words",
    [
        [],
        ["--json"],
        ["--key", "a.pub"],
        ["d", "--html", "page.html"],
        ["d", "--noise", "0.1"],
        ["d", "--insecure"],
        ["d", "--help"],
        ["--help"],
        ["d", "-v"],
        ["d", "--verbose"],
        ["d", "docker://registry/image@sha256:00"],
        ["docker://registry/image"],
        ["d", "--json", "--json"],
        ["d", "--key=a.pub"],
        ["d", "--key"],
        ["d", "--key", ""],
        ["d", "--key", "--json"],
        ["d", "--unknown"],
        ["d", "--"],
        ["d", ""],
        ["d", "-"],
    ],
)
def test_fleet_status_forms_the_fast_path_does_not_read_go_to_the_typer_app(
    words: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert _read_fleet_status(words) is None
    assert fast_path.answered(["fleet", "status", *words]) is None and capsys.readouterr() == ("", "")


WORDS = st.sampled_from(
    ["d", "e/f", "--key", "k.pub", "--json", "--html", "--noise", "--insecure", "-v", "--help", "docker://r/i", "", "-"]
) | st.text(max_size=6)


@given(words=st.lists(WORDS, max_size=8))
def test_the_fleet_status_reader_never_raises_and_reads_only_its_forms(words: list[str]) -> None:
    """Any word list: None, or the folders (one at least, none an option or an image), the keys (each the word
    after a `--key`) and `--json` at most once, which together are every word."""
    read = _read_fleet_status(words)
    if read is None:
        return
    sources, keys, as_json = read
    assert sources and all(s and not s.startswith(("-", "docker://")) for s in sources)
    assert all(key and not key.startswith("-") for key in keys)
    assert words.count("--json") == as_json and words.count("--key") == len(keys)
    rest, found = list(words), []
    while "--key" in rest:
        at = rest.index("--key")
        found.append(rest[at + 1])
        del rest[at : at + 2]
    assert found == keys and [word for word in rest if word != "--json"] == sources


@pytest.mark.slow
def test_a_file_an_empty_argument_and_a_refused_latest_answer_as_the_typer_app(
    fleets: dict[str, tuple[Path, Path]], tmp_path: Path
) -> None:
    """A FOLDER that is a file: a certificate is that one certificate, any other file (the key itself) an error,
    never its parent folder read; an empty argument an error, not the current folder; a node whose other
    certificate is refused (here the newer one, edited) is REFUSED, never passed. The fast path's answer is the
    typer app's, byte for byte, each with and without --json."""
    folder, public = fleets["fleet"]
    mixed = tmp_path / "mixed"
    for week, source in (("week1", "node-b"), ("week2", "forged")):
        (mixed / week).mkdir(parents=True)
        shutil.copy(folder / f"{source}.cert.json", mixed / week / "node-b.cert.json")
    home = tmp_path / "home"
    answers = {}
    for name, argument in (
        ("key", str(public)),
        ("one", str(folder / "node-b.cert.json")),
        ("empty", ""),
        ("mixed", str(mixed)),
    ):
        for extra in ([], ["--json"]):
            line = ["fleet", "status", argument, "--key", str(public), *extra]
            fast = _lockgen(*line, home=home)
            assert _ageless(fast[:3]) == _ageless(_lockgen(*line, "--noise", "0.05", home=home)[:3]), fast
            answers[name, bool(extra)] = fast[:3]
    hint = "hint: pass folders holding *.cert.json (lockgen fleet slurm's --certs), a *.cert.json, or image references"
    for as_json in (False, True):
        assert answers["key", as_json] == (1, "", f"error: `{public}` is not a folder of certificates\n{hint}")
        assert answers["empty", as_json] == (
            1,
            "",
            f"error: an empty argument is not a folder of certificates\n{hint}",
        )
    assert answers["one", False][0] == 0 and [line.split()[0] for line in answers["one", False][1].splitlines()] == [
        "node-b"
    ]
    code, out, err = answers["mixed", False]
    (row, refused) = out.splitlines()
    assert code == 1 and row.split()[:4] == ["node-b", "lock", row.split()[2], "REFUSED"], out
    assert row.endswith("[1 refused certificate of this node, undated: may be its latest]")
    assert refused.startswith("REFUSED node-b ") and "error: 0 failed, 1 refused of 1 node certificates (node-b)" in err
    (json_row,) = json.loads(answers["mixed", True][1])["rows"]
    assert json_row["node"] == "node-b" and json_row["passed"] is False and json_row["refused"] == 1


@pytest.mark.slow
@pytest.mark.parametrize("noise", ["-1", "nan", "inf"])
def test_a_noise_that_is_no_fraction_of_0_or_more_is_a_usage_error(
    fleets: dict[str, tuple[Path, Path]], tmp_path: Path, noise: str
) -> None:
    """`--noise=-1` marked every unchanged figure REGRESSED, NaN or infinity none: refused (exit 2) before anything
    is read; a form the fast path leaves to the typer app, which answers it."""
    folder, public = fleets["fleet"]
    answer = _lockgen("fleet", "status", str(folder), "--key", str(public), f"--noise={noise}", home=tmp_path / "home")
    assert answer[:3] == (
        2,
        "",
        f"error: --noise {float(noise):g} is not a fraction of 0 or more\n"
        "hint: --noise 0.05 (a change within 5% is noise)",
    )
