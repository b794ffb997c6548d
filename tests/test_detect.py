"""`lockgen detect`: the example stacks' targets against nodes stated in files (`--node`, `$LOCKGEN_NODE_FACTS`),
matching and not, each saying why; this machine probed (its glibc as `ldd --version` reports it); and bad
input through every new command (hypothesis): exit 1 or 2 with one `error:` line and a hint, never a traceback."""

from __future__ import annotations

import json
import re
import string
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import REPO, run_cli

TORCH = REPO / "envs" / "examples" / "torch-pypi" / "stack.toml"
QUICKSTART = REPO / "envs" / "examples" / "quickstart"
NAME = string.ascii_letters + string.digits + " ._-"


def node(
    tmp_path: Path,
    platform: str = "linux-64",
    glibc: str | None = "2.35",
    driver: str | None = None,
    *capabilities: str,
) -> Path:
    path = tmp_path / "node.json"
    path.write_text(
        json.dumps(
            {
                "platform": platform,
                "glibc": glibc,
                "driver": driver,
                "gpus": [{"name": f"GPU {c}", "compute_capability": c} for c in capabilities],
            }
        )
    )
    return path


@pytest.mark.parametrize(
    ("facts", "target"),
    [
        (("linux-64", "2.35", "580.95.05", "9.0", "9.0"), "h100"),  # also fits h100-r580ga: the newer driver wins
        (("linux-64", "2.35", "580.65.06", "9.0"), "h100-r580ga"),  # h100 needs 580.95.05
        (("linux-64", "2.28", "550.54.15", "8.0"), "a100"),
        (("linux-64", "2.39", "590.44.01", "10.0"), "b200"),
        (("linux-aarch64", "2.35", "580.95.05", "9.0"), "gh200"),
        (("linux-64", "2.31", "575.57.08", "7.0"), "v100"),
    ],
)
def test_a_gpu_node_gets_its_target(tmp_path: Path, facts: tuple[str, ...], target: str) -> None:
    found = run_cli("detect", str(TORCH), "--node", str(node(tmp_path, *facts)))
    assert found.returncode == 0 and found.stdout == f"{target}\n", found.stderr
    assert f"{target}: chosen: platform {facts[0]}; glibc {facts[1]} >= 2.28; arch " in found.stderr
    assert f"driver {facts[2]} >=" in found.stderr


@pytest.mark.parametrize(
    ("facts", "differs"),
    [
        (("linux-64", "2.35", None), "arch: the node has no GPU, the target is sm90"),
        (("linux-64", "2.35", "580.95.05", "8.0", "9.0"), "arch: the node's GPUs are sm80/sm90, the target is sm90"),
        (("linux-64", "2.35", "535.104.05", "9.0"), "driver: the node has 535.104.05, the target needs >= 580.65.06"),
        (("linux-64", "2.17", "580.95.05", "9.0"), "glibc: the node has 2.17, the target needs >= 2.28"),
        (("linux-64", None, "580.95.05", "9.0"), "glibc: the node has none known"),
        (("linux-aarch64", "2.35", "580.95.05", "8.0"), "platform: the node is linux-aarch64, the target linux-64"),
    ],
)
def test_no_match_lists_every_target_and_what_differs(tmp_path: Path, facts: tuple, differs: str) -> None:
    found = run_cli("detect", str(TORCH), "--node", str(node(tmp_path, *facts)))
    assert found.returncode == 1 and found.stdout == "" and differs in found.stderr, found.stderr
    (line,) = [line for line in found.stderr.splitlines() if line.startswith("error:")]
    for target in ("v100", "a100", "h100", "h100-r580ga", "b200", "gh200"):
        assert f" {target}: " in line
    assert "hint: " in found.stderr and "Traceback" not in found.stderr


def test_cpu_targets_by_glibc_and_a_gpu_node_of_a_cpu_only_stack(tmp_path: Path) -> None:
    today = run_cli("detect", str(QUICKSTART), "--node", str(node(tmp_path, "linux-64", "2.36")))
    assert today.stdout == "cpu\n" and "cpu-el7: matches, a closer one is chosen" in today.stderr
    old = run_cli("detect", str(QUICKSTART), env={"LOCKGEN_NODE_FACTS": str(node(tmp_path, "linux-64", "2.17"))})
    assert (
        old.stdout == "cpu-el7\n" and "cpu: differs: glibc: the node has 2.17, the target needs >= 2.28\n" in old.stderr
    )
    gpu = run_cli(
        "detect", str(QUICKSTART), "--json", "--node", str(node(tmp_path, "linux-64", "2.36", "580.95.05", "9.0"))
    )
    document = json.loads(gpu.stdout)
    assert document["target"] == "cpu" and "the stack has no GPU target; unused: 1 GPU" in document["reasons"][-1]


def test_a_gpu_node_never_falls_back_to_a_cpu_target_of_a_gpu_stack(tmp_path: Path) -> None:
    stack = tmp_path / "stack.toml"
    stack.write_text(
        '[stack]\nname = "s"\npython = "3.11"\n[pypi-dependencies]\nnumpy = "*"\n[targets.cpu]\narch = '
        '"cpu"\n[targets.h100]\narch = "sm90"\ndriver = "580.95.05"\n'
    )
    old_driver = run_cli("detect", str(stack), "--node", str(node(tmp_path, "linux-64", "2.35", "550.54.15", "9.0")))
    assert (
        old_driver.returncode == 1
        and "): cpu: cpu target, and the node has 1 GPU the stack has GPU targets for (--target chooses it); h100: "
        "driver: the node has 550.54.15, the target needs >= 580.95.05"
        in old_driver.stderr
    )
    stack.write_text(stack.read_text() + '[targets.h100b]\narch = "sm90"\ndriver = "580.95.05"\n')
    tied = run_cli("detect", str(stack), "--node", str(node(tmp_path, "linux-64", "2.35", "580.95.05", "9.0")))
    assert (
        tied.returncode == 1 and "targets h100, h100b of" in tied.stderr and "hint: pass --target h100" in tied.stderr
    )


def test_this_node_probed(tmp_path: Path) -> None:
    """No stated facts: this machine's own (no nvidia-smi here: no GPU), its glibc as ldd says it."""
    found = run_cli("detect", str(QUICKSTART), "--json")
    assert found.returncode == 0, found.stderr
    facts = json.loads(found.stdout)["node"]
    ldd = subprocess.run(["ldd", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    assert ldd.endswith(f" {facts['glibc']}") and facts["platform"] == "linux-64"
    assert facts["gpus"] == [] and facts["driver"] is None
    stated = tmp_path / "again.json"
    stated.write_text(json.dumps(facts))  # what --json prints under `node` is a facts file
    assert run_cli("detect", str(QUICKSTART), "--json", "--node", str(stated)).stdout == found.stdout


FUZZ = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "platform": st.sampled_from(["linux-64", "linux-aarch64", "osx-arm64", "", "linux 64", "x\n"]),
        "glibc": st.sampled_from(["2.28", "2.17", "2", "2.x", None, 2.28]),
        "driver": st.sampled_from(["580.95.05", "580", None, "5a0.1", ""]),
        "gpus": st.lists(
            st.fixed_dictionaries(
                {"name": st.text(max_size=8), "compute_capability": st.sampled_from(["9.0", "10.0", "9", "sm90", ""])}
            ),
            max_size=2,
        ),
        "extra": st.integers(),
    },
)


def clean_failure(result: subprocess.CompletedProcess[str], allowed: tuple[int, ...] = (1, 2)) -> None:
    """One `error:` line and a hint (exit 1), or typer's usage error (exit 2); never a traceback."""
    assert result.returncode in allowed, result.stderr
    # a traceback's own first line: the word alone may be the user's text, echoed in the error line
    assert "Traceback (most recent call last)" not in result.stderr, result.stderr
    assert "error: unexpected" not in result.stderr, result.stderr
    if result.returncode == 1:
        assert len([line for line in result.stderr.splitlines() if line.startswith("error:")]) == 1, result.stderr
        assert re.search(r"^hint: \S", result.stderr, re.M), result.stderr


@pytest.mark.slow
@FUZZ
@given(facts=st.one_of(JSON, FIELDS))
def test_node_facts_files_of_every_shape(tmp_path: Path, facts: object) -> None:
    path = tmp_path / "node.json"
    path.write_text(json.dumps(facts))
    result = run_cli("detect", str(QUICKSTART), "--node", str(path))
    clean_failure(result, (0, 1))
    if result.returncode == 0:
        assert result.stdout in ("cpu\n", "cpu-el7\n")


@pytest.mark.slow
@FUZZ
@given(command=st.sampled_from(["run", "shell", "activate", "detect"]), data=st.data())
def test_bad_input_through_the_new_commands(tmp_path: Path, command: str, data: st.DataObject) -> None:
    folder = Path(tempfile.mkdtemp(dir=tmp_path))  # each example its own: a good one leaves its env and stack
    lock = QUICKSTART / "locks" / "cpu.conda-lock.yml"
    kind = data.draw(st.sampled_from(["stack", "lock", "platform", "shell", "target", "node", "missing"]))
    text = data.draw(st.text(string.printable, max_size=80))
    args: list[str] = [] if command == "detect" else ["--prefix", str(folder / "env")]
    if kind in ("stack", "lock"):
        source = folder / ("stack.toml" if kind == "stack" else "x.conda-lock.yml")
        source.write_text(text)
        args.insert(0, str(source))
    elif kind == "platform" and command != "detect":
        args = [str(lock), "--platform", text or "x", *args]
    elif kind == "shell" and command == "activate":
        args = [str(lock), "--shell", (text or "x").strip() or "x", *args]
    elif kind == "target" and command != "detect":
        args = [str(QUICKSTART), "--target", text or "x", *args]
    elif kind == "node":
        (folder / "node.json").write_text(text)
        args = [str(QUICKSTART)] + (["--node", str(folder / "node.json")] if command == "detect" else args)
        env = {"LOCKGEN_NODE_FACTS": str(folder / "node.json")}
    else:
        args.insert(
            0,
            str(folder / "absent" / (data.draw(st.text(NAME, min_size=1, max_size=30)) + ".toml" * (kind == "stack"))),
        )
    tail = ["--", "true"] if command == "run" else []
    result = run_cli(command, *args, *tail, env=env if kind == "node" else None, cwd=folder)
    if result.returncode == 0:  # text that happens to be good (a platform the lock has, a shell lockgen knows)
        assert kind in ("shell", "platform", "node", "target", "stack"), result.stderr
        return
    clean_failure(result)
    assert not (folder / "env").exists()  # nothing half made
