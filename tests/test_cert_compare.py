"""`lockgen cert compare A B`: `--noise` taken only as a finite fraction of 0 or more, a change too large for a
float said without an infinity (strict `--json`), and a refused certificate named as A or B with its file."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from lockgen.adapters.node import signing
from lockgen.core.certificate.certify import compare_figures, relative_change
from tests.conftest import REPO, run_cli

H200 = REPO / "envs" / "examples" / "h200-system"


def _signed(tmp_path: Path, name: str, gemm: float | None = None, unit: str | None = None) -> Path:
    """The recorded full H200 certificate signed with `tmp_path/k`, its bf16 GEMM (and unit) set when given."""
    body = json.loads((H200 / "h200-full.cert.json").read_text())["certificate"]
    if gemm is not None:
        body["figures"]["gemm"]["bf16"]["value"] = gemm
    if unit is not None:
        body["figures"]["gemm"]["bf16"]["unit"] = unit
    if not (tmp_path / "k").exists():
        signing.keygen(tmp_path / "k")
    path = tmp_path / f"{name}.cert.json"
    path.write_text(signing.signed_file(body, tmp_path / "k"))
    return path


def _strict(text: str) -> object:
    """`text` read as strict JSON: NaN, Infinity and -Infinity refused."""

    def refuse(constant: str) -> object:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def _usage_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2 and result.stdout == "" and "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.splitlines()
    assert lines[0].startswith("error: --noise ") and lines[1] == "hint: --noise 0.05 (a change within 5% is noise)"
    return lines[0]


@pytest.mark.slow
@pytest.mark.parametrize("noise", ["-1", "-0.01", "nan", "inf", "-inf", "1e999"])
def test_a_noise_that_is_no_fraction_of_0_or_more_is_a_usage_error(tmp_path: Path, noise: str) -> None:
    """A negative `--noise` made every unchanged figure a regression; NaN or infinity turned regressions off."""
    certificate = _signed(tmp_path, "a")
    line = _usage_error(run_cli("cert", "compare", str(certificate), str(certificate), f"--noise={noise}"))
    assert line.endswith("is not a fraction of 0 or more")
    assert run_cli("cert", "compare", str(certificate), str(certificate), "--noise", "0").returncode == 0


@pytest.mark.slow
def test_changes_beyond_a_float_s_range_are_said_and_written_as_strict_json(tmp_path: Path) -> None:
    """1e-300 to 1e300 is no finite change: null in JSON, 'better, by too much to state' in text; -1e308 to 1e308
    is +200% (an increase, not `-inf%` and a regression); each --json output parses as strict JSON."""
    tiny, huge = _signed(tmp_path, "tiny", 1e-300), _signed(tmp_path, "huge", 1e300)
    key = ["--key", str(tmp_path / "k.pub")]
    up = run_cli("cert", "compare", str(tiny), str(huge), "--json", *key)
    assert up.returncode == 0, up.stderr
    gemm = next(row for row in _strict(up.stdout)["figures"] if row["name"] == "gemm/bf16")
    assert gemm["change"] is None and not gemm["regression"]
    text = run_cli("cert", "compare", str(tiny), str(huge), *key).stdout
    assert "(better, by too much to state)" in text and "inf" not in text
    negative, positive = _signed(tmp_path, "negative", -1e308), _signed(tmp_path, "positive", 1e308)
    rise = run_cli("cert", "compare", str(negative), str(positive), *key)
    assert rise.returncode == 0 and "(+200.0%)" in rise.stdout and "REGRESSION" not in rise.stdout, rise.stdout
    fall = run_cli("cert", "compare", str(positive), str(negative), "--json", *key)
    gemm = next(row for row in _strict(fall.stdout)["figures"] if row["name"] == "gemm/bf16")
    assert fall.returncode == 1 and gemm["change"] == -2.0 and gemm["regression"]


@pytest.mark.slow
def test_a_refused_certificate_is_named_as_a_or_b_with_its_file(tmp_path: Path) -> None:
    good = _signed(tmp_path, "good")
    forged = tmp_path / "forged\x1b[2J.cert.json"  # a file name that would drive the terminal: escaped
    document = json.loads(_signed(tmp_path, "forged-source").read_text())
    document["certificate"]["figures"]["gemm"]["bf16"]["value"] = 999.0
    forged.write_text(signing.render(document))
    key = ["--key", str(tmp_path / "k.pub")]
    for first, second, label in ((good, forged, "B"), (forged, good, "A")):
        result = run_cli("cert", "compare", str(first), str(second), *key)
        assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
        line = result.stderr.splitlines()[0]
        shown = str(forged).replace("\x1b", "\\x1b")
        assert (
            line
            == f"error: certificate {label} `{shown}`: certificate signature does not verify: its content was changed"
        )
    missing = run_cli("cert", "compare", str(good), str(tmp_path / "gone.cert.json"))
    assert missing.returncode == 1 and missing.stderr.startswith("error: certificate B: cannot read certificate `")


FINITE = st.floats(allow_nan=False, allow_infinity=False)


@given(old=FINITE, new=FINITE, unit=st.sampled_from(["TFLOP/s", "ms", "GB/s", "us"]))
def test_every_change_of_finite_figures_is_finite_or_none_and_a_regression_only_when_worse(
    old: float, new: float, unit: str
) -> None:
    """No finite pair of values makes an infinite or NaN change (what `--json` would write as Infinity); a change is
    None only where it is beyond a float (or from 0); a regression is always a move the worse way."""
    figures = compare_figures({"g": {"f": {"value": old, "unit": unit}}}, {"g": {"f": {"value": new, "unit": unit}}}, 0)
    (row,) = figures
    assert row.change is None or math.isfinite(row.change)
    assert (row.change is None) == (relative_change(old, new) is None)
    assert row.change is not None or old == 0 or abs(new / old) > 1e300 or abs(old) < 1e-300
    worse = new > old if unit in ("ms", "us") else new < old
    assert not row.regression or worse
    assert row.regression == (old != 0 and worse)  # noise 0: any worse move beyond nothing
    assert "inf" not in row.line() and "nan" not in row.line()
    assert len(row.change_text()) <= 30  # a change of 1e20 is not twenty digits of percent
