"""The command line as users meet it: exit codes, `error:`/`hint:` without tracebacks, nothing half written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli

STACK = """\
[stack]
name = "s"
channels = ["conda-forge"]
[dependencies]
python = ">=3.11,<3.13"
pytorch = ">=2.4"
[targets.h100]
arch = "sm90"
driver = "575.57.08"
"""


def assert_clean_failure(result, fragment: str) -> None:
    assert result.returncode == 1, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1 and fragment in errors[0], result.stderr
    assert any(line.startswith("hint: ") for line in lines)
    assert "Traceback" not in result.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (lambda t: t.replace('name = "s"', 'name = "s'), "malformed TOML"),
        (lambda t: t + "gpus = 8\n", "unknown key `gpus`"),
        (lambda t: t.replace('arch = "sm90"', 'arch = "sm99"'), "unknown arch `sm99`"),
        (lambda t: t.replace('driver = "575.57.08"', 'driver = "450.80.02"'), "needs CUDA >= 11.8"),
        (lambda t: t.replace('pytorch = ">=2.4"', 'pytorch = ">=9"'), "unsatisfiable"),
        (
            lambda t: t.replace('python = ">=3.11,<3.13"', 'python = ">=3.11,<3.13"\nno-such-package = "*"'),
            "unsatisfiable",
        ),
    ],
)
def test_bad_input_fails_cleanly_and_writes_nothing(tmp_path: Path, snapshot: Path, change, fragment: str) -> None:
    stack = tmp_path / "stack.toml"
    stack.write_text(change(STACK))
    result = run_cli("resolve", str(stack), "--channel-alias", f"conda-forge={snapshot}")
    assert_clean_failure(result, fragment)
    assert not (tmp_path / "locks").exists()


@pytest.mark.slow
def test_unreachable_channel(tmp_path: Path) -> None:
    stack = tmp_path / "stack.toml"
    stack.write_text(STACK)
    result = run_cli("resolve", str(stack), "--channel-alias", "conda-forge=http://127.0.0.1:9")
    assert_clean_failure(result, "cannot read channel")
    missing = run_cli("resolve", str(stack), "--channel-alias", f"conda-forge={tmp_path / 'nowhere'}")
    assert_clean_failure(missing, "does not exist")
    assert not (tmp_path / "locks").exists()


@pytest.mark.slow
def test_missing_stack_file_and_unknown_target(tmp_path: Path, snapshot: Path) -> None:
    assert_clean_failure(run_cli("resolve", str(tmp_path / "absent.toml")), "does not exist")
    stack = tmp_path / "stack.toml"
    stack.write_text(STACK)
    result = run_cli("resolve", str(stack), "--target", "b300", "--channel-alias", f"conda-forge={snapshot}")
    assert_clean_failure(result, "no target `b300`")


@pytest.mark.slow
def test_a_failing_target_leaves_the_other_locks_untouched(tmp_path: Path, snapshot: Path) -> None:
    stack = tmp_path / "stack.toml"
    stack.write_text(STACK + '[targets.b200-old]\narch = "sm100"\ndriver = "570.86.10"\n')
    result = run_cli("resolve", str(stack), "--channel-alias", f"conda-forge={snapshot}")
    assert_clean_failure(result, "no pytorch build")
    assert not (tmp_path / "locks").exists()


@pytest.mark.slow
def test_dry_run_and_json(tmp_path: Path, snapshot: Path) -> None:
    import json

    stack = tmp_path / "stack.toml"
    stack.write_text(STACK)
    result = run_cli("resolve", str(stack), "--dry-run", "--json", "--channel-alias", f"conda-forge={snapshot}")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data[0]["target"] == "h100" and data[0]["written"] is False
    assert data[0]["highlights"]["linux-64"]["pytorch"].split()[1].startswith("cuda12")
    assert not (tmp_path / "locks").exists()


@pytest.mark.slow
def test_stdout_carries_only_the_lock_paths(tmp_path: Path, snapshot: Path) -> None:
    stack = tmp_path / "stack.toml"
    stack.write_text(STACK)
    result = run_cli("resolve", str(stack), "--channel-alias", f"conda-forge={snapshot}")
    assert result.returncode == 0
    assert result.stdout.splitlines() == [str(tmp_path / "locks" / "h100.conda-lock.yml")]
    assert "resolving h100" in result.stderr


@pytest.mark.slow
def test_arch_command() -> None:
    listing = run_cli("arch")
    assert listing.returncode == 0 and "sm90" in listing.stdout and "H100" in listing.stdout
    sm100 = run_cli("arch", "sm100")
    assert sm100.returncode == 0
    assert "first_cuda: 12.8" in sm100.stdout and "B200" in sm100.stdout
    assert "CUDA 12.0: ptx" in sm100.stdout and "CUDA 12.9: sass" in sm100.stdout
    assert "570.26" in sm100.stdout  # the driver floor of CUDA 12.8
    assert_clean_failure(run_cli("arch", "sm42"), "unknown arch")
    cpu = run_cli("arch", "cpu")  # the hint of an unknown arch lists cpu: it must answer too
    assert cpu.returncode == 0 and "gpus: none" in cpu.stdout and "CPU builds of torch" in cpu.stdout


@pytest.mark.slow
def test_usage_errors_exit_2() -> None:
    assert run_cli("resolve", "--no-such-flag").returncode == 2
    assert run_cli("no-such-command").returncode == 2


@pytest.mark.slow
def test_version_and_an_empty_certificate_listing_say_so(tmp_path: Path) -> None:
    from lockgen import __version__

    version = run_cli("--version")
    assert version.returncode == 0 and version.stdout.strip() == f"lockgen {__version__}"
    empty = run_cli("certs", str(tmp_path))
    assert empty.returncode == 0 and f"no certificates under {tmp_path}" in empty.stderr


@pytest.mark.slow
def test_arch_output_keeps_names_whole_sorts_versions_as_numbers_and_cites_followable_sources() -> None:
    listing = run_cli("arch").stdout
    assert "Blackwell (datacenter, GB100/GB102)" in listing  # was cut to "Blackwell (datace"
    official = [
        line.split()[2] for line in run_cli("arch", "sm90").stdout.splitlines() if line.startswith("  - torch ")
    ]
    numbers = [tuple(int(x) for x in v.split(".")) for v in official]
    assert numbers == sorted(numbers) and numbers.index((2, 9)) < numbers.index((2, 10))
    shown = run_cli("arch", "sm90").stdout
    assert "find_string" not in shown and "read_file" not in shown and "search corpus" not in shown
