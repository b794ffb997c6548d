"""Every benchmark runs at its `--smoke` size, so an API change that breaks one turns the suite red (they
are not run otherwise). No ratio is judged here: a smoke size measures fixed costs, not the floor."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BENCHMARKS = sorted(p.name for p in (REPO / "benchmarks").glob("bench_*.py"))
NEEDS_TORCH = {"bench_gpt_step.py", "bench_verify_phases.py"}  # the verify kernel's own code, on the CPU
KEPT_IN_TMPDIR = {
    "bench_gpt_step.py": "torchinductor_",  # torch's own cache, kept between runs by design
    "bench_verify_phases.py": "verify-phases-",  # the kernel's documents, named on its last line ("documents in")
}


@pytest.mark.slow
@pytest.mark.parametrize("name", BENCHMARKS)
def test_benchmark_runs_at_smoke_size(name: str, tmp_path: Path) -> None:
    if name in NEEDS_TORCH and importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed")
    # without the suite's LOCKGEN_FILE_ROOTS: a benchmark names the folders of its own channels, as run by hand
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    env = {
        **{k: v for k, v in os.environ.items() if k != "LOCKGEN_FILE_ROOTS"},
        "PYTHONPATH": str(REPO),
        "NO_COLOR": "1",
        "TMPDIR": str(temporary),
    }
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / name), "--smoke"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, f"{name} --smoke failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    assert "OVER" not in done.stdout and "within" not in done.stdout  # smoke sizes are never judged
    assert "left out, every attempt failed" not in done.stdout, done.stdout
    # nothing is left in the temporary folder (a benchmark's own folder is removed, with what its tools put there)
    # but what is kept on purpose
    kept = KEPT_IN_TMPDIR.get(name)
    assert sorted(path.name for path in temporary.iterdir() if not (kept and path.name.startswith(kept))) == []


def test_every_benchmark_has_a_smoke_size() -> None:
    """A benchmark added without `--smoke` (the harness's flag) would fail above; said here by name."""
    missing = [name for name in BENCHMARKS if "add_smoke(" not in (REPO / "benchmarks" / name).read_text()]
    assert not missing, f"benchmarks without --smoke: {missing}"


def test_a_crashing_baseline_is_retried_reported_and_never_aborts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    sys.path.insert(0, str(REPO))
    from benchmarks import harness

    monkeypatch.setattr(harness, "CRASHES", {})
    monkeypatch.setattr(harness, "GAVE_UP", [])

    flag = tmp_path / "crashed-once"
    flaky = f"if [ -e {flag} ]; then exit 0; else touch {flag}; kill -SEGV $$; fi"
    assert harness.timed(flaky, shell=True) is not None  # crashed once, then ran
    assert harness.timed(["sh", "-c", "kill -SEGV $$"]) is None  # crashed every time: left out, no exception
    harness.report("a figure", 1.0, None, 1.2, smoke=False)
    harness.report_crashes()
    said = capsys.readouterr().out
    assert "no ratio (a side never succeeded)" in said
    assert harness.CRASHES == {"if exit -11": 1, "sh exit -11": harness.ATTEMPTS}
    assert f"at most {harness.ATTEMPTS} attempts" in said and "left out, every attempt failed: sh" in said
    with pytest.raises(SystemExit):
        harness.timed(["sh", "-c", "exit 3"], required=True)  # lockgen's own command failing stops the benchmark
