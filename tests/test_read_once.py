"""Each input a command reads is read once (issue 32): the stack file, its base and the base's lock by resolve
(plain and team stacks, `--check`, `--update`), explain, detect and activate; the lock by materialize, check
`--lock` (a prefix, its kept verdict, an image), export (from the lock, a prefix, an image) and pack. Each command
runs in this process through typer's CliRunner while `tests/open_audit.py` counts the opens of the files it is
given; a second read planted in a step is caught (`verify`'s own test, on CPU, is `test_verify_reads_its_lock_once`
in test_verify_cpu.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lockgen.cli.app import app
from tests.channel_factory import Pkg, build_channel
from tests.conftest import REPO
from tests.open_audit import opened
from tests.test_export import make_lock

TEAM_JUPYTER = REPO / "envs" / "examples" / "team-jupyter"


def invoke(*args: str) -> str:
    """Runs `lockgen ARGS` in this process; its output (stdout and stderr), asserting it succeeded."""
    done = CliRunner().invoke(app, list(args))
    assert done.exit_code == 0, (args, done.output, done.exception)
    return done.output


def opens(paths: list[Path], *args: str) -> dict[str, int]:
    """How often `lockgen ARGS` opened each of `paths`."""
    with opened(*paths) as counts:
        invoke(*args)
    return dict(counts)


def each_once(paths: list[Path], *args: str) -> None:
    """`lockgen ARGS` opens each of `paths` exactly once."""
    counts = opens(paths, *args)
    assert counts == {str(p): 1 for p in paths}, (args, counts)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def team(tmp_path: Path) -> tuple[Path, Path]:
    """(the base stack, resolved, and a team stack on it), both on a tiny local channel."""
    channel = build_channel(
        tmp_path / "channel", [Pkg("tok", "0.21.4"), Pkg("base-lib", "1.0", depends=("tok",)), Pkg("teamtool", "1.0")]
    )
    base = write(
        tmp_path / "platform" / "stack.toml",
        f'[stack]\nname = "platform"\nchannels = ["{channel.as_uri()}"]\n[dependencies]\nbase-lib = '
        '"*"\n[targets.cpu]\narch = "cpu"\n',
    )
    invoke("resolve", str(base))
    stack = write(
        tmp_path / "team" / "stack.toml",
        '[stack]\nname = "team"\nextends = "../platform/stack.toml"\n[dependencies]\nteamtool = "*"\n',
    )
    return base, stack


def test_resolve_reads_a_plain_stack_and_its_lock_once(tmp_path: Path) -> None:
    lock = make_lock(tmp_path, "1.0")
    stack = lock.parent.parent / "stack.toml"
    each_once([stack, lock], "resolve", str(stack))  # the lock, unchanged, read once to be compared
    for args in (
        ("resolve", str(stack)),
        ("resolve", str(stack), "--check"),
        ("resolve", str(stack), "--update", "libfoo"),
        ("resolve", str(stack), "--dry-run"),
    ):
        each_once([stack, lock], *args)


def test_resolve_reads_a_team_stack_its_base_and_the_base_lock_once(team: tuple[Path, Path]) -> None:
    base, stack = team
    base_lock, team_lock = base.parent / "locks" / "cpu.conda-lock.yml", stack.parent / "locks" / "cpu.conda-lock.yml"
    each_once([stack, base, base_lock], "resolve", str(stack))
    for args in (
        ("resolve", str(stack), "--check"),
        ("resolve", str(stack), "--update", "teamtool"),
        ("resolve", str(stack)),
    ):
        each_once([stack, base, base_lock, team_lock], *args)


def test_add_and_remove_read_the_stack_its_base_and_each_lock_once(team: tuple[Path, Path]) -> None:
    """`lockgen add` reads the stack once (the text it edits is the text it solves), its base and the lock it
    compares with once; `remove` the same."""
    base, stack = team
    base_lock = base.parent / "locks" / "cpu.conda-lock.yml"
    invoke("resolve", str(stack))
    team_lock = stack.parent / "locks" / "cpu.conda-lock.yml"
    each_once([stack, base, base_lock, team_lock], "add", "tok", "--stack", str(stack))
    each_once([stack, base, base_lock, team_lock], "remove", "tok", "--stack", str(stack))


def test_resolve_check_of_the_team_jupyter_example_reads_each_file_once() -> None:
    """The example's team stack on its platform stack (PyPI only): nothing is solved, so no network."""
    team, platform = TEAM_JUPYTER / "team", TEAM_JUPYTER / "platform"
    each_once(
        [
            team / "stack.toml",
            platform / "stack.toml",
            platform / "locks" / "cpu.conda-lock.yml",
            team / "locks" / "cpu.conda-lock.yml",
        ],
        "resolve",
        str(team / "stack.toml"),
        "--check",
    )


def test_each_stack_file_is_parsed_once_per_command(team: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The TOML of each stack file is read once, for what it extends and for its spec (issue 46: a plain stack was
    parsed twice per resolve, a team stack and its base four times), by resolve and explain alike; a stack that extends
    nothing, read before, not at all (its spec kept by its bytes)."""
    from lockgen.core.stack import spec_parse

    base, stack = team
    parsed: list[str] = []
    real = spec_parse._document
    monkeypatch.setattr(spec_parse, "_document", lambda text, source: parsed.append(source) or real(text, source))
    invoke("resolve", str(stack))
    assert sorted(Path(p).resolve() for p in parsed) == sorted([stack.resolve(), base.resolve()]), parsed
    parsed.clear()
    invoke("explain", str(base), "--target", "cpu")
    assert parsed == []  # its bytes' spec kept when it was read before (`kept_inputs.keep_spec`): not parsed again
    monkeypatch.setenv("LOCKGEN_REPARSE", "1")
    invoke("explain", str(base), "--target", "cpu")
    assert parsed == [str(base)]


def test_a_team_stack_on_a_lock_reads_the_lock_once(tmp_path: Path) -> None:
    """The base lock (the example's platform lock, a venv's) is read with the stack, which takes its target and
    Python from it, and is what resolve holds and hashes."""
    base_lock = tmp_path / "vendor" / "cpu.conda-lock.yml"
    write(base_lock, (TEAM_JUPYTER / "platform" / "locks" / "cpu.conda-lock.yml").read_text())
    stack = write(
        tmp_path / "adopted" / "stack.toml",
        '[stack]\nname = "adopted"\nextends = "../vendor/cpu.conda-lock.yml"\n[pypi-dependencies]\nsix = "*"\n',
    )
    with opened(stack, base_lock) as counts:
        done = CliRunner().invoke(app, ["resolve", str(stack), "--check"])
    assert done.exit_code == 1 and "target-missing" in done.output, done.output  # no lock of its own yet
    assert dict(counts) == {str(stack): 1, str(base_lock): 1}


def test_explain_detect_and_activate_read_the_stack_once(tmp_path: Path, team: tuple[Path, Path]) -> None:
    _, stack = team
    team_stack, platform = TEAM_JUPYTER / "team" / "stack.toml", TEAM_JUPYTER / "platform" / "stack.toml"
    each_once([team_stack, platform], "explain", str(team_stack), "--target", "cpu")
    node = write(
        tmp_path / "node.json", json.dumps({"platform": "linux-64", "glibc": "2.35", "driver": None, "gpus": []})
    )
    each_once([team_stack, platform], "detect", str(team_stack), "--node", str(node))
    invoke("resolve", str(stack))
    team_lock = stack.parent / "locks" / "cpu.conda-lock.yml"
    each_once([stack, team_lock], "activate", str(stack), "--target", "cpu", "--prefix", str(tmp_path / "env"))


@pytest.fixture
def lock(tmp_path: Path) -> Path:
    return make_lock(tmp_path, "1.0")


def test_materialize_and_check_read_the_lock_once(lock: Path, tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    each_once([lock], "materialize", str(lock), "--prefix", str(prefix))  # built
    each_once([lock], "materialize", str(lock), "--prefix", str(prefix))  # found unchanged
    each_once([lock], "materialize", str(lock))  # the store's prefix, named from the lock
    each_once([lock], "check", "--lock", str(lock), "--prefix", str(prefix))  # the work done
    each_once([lock], "check", "--lock", str(lock), "--prefix", str(prefix))  # a kept verdict, or the work again
    each_once([lock], "check", "--lock", str(lock), "--prefix", str(prefix), "--full")


def test_export_check_image_and_pack_read_the_lock_once(lock: Path, tmp_path: Path) -> None:
    image, prefix = tmp_path / "img", tmp_path / "env"
    each_once([lock], "export", str(lock), "--out", str(image))
    each_once([lock], "check", "--image", str(image), "--lock", str(lock))
    each_once([lock], "export", str(lock), "--from-image", str(image), "--out", str(tmp_path / "adopted"))
    invoke("materialize", str(lock), "--prefix", str(prefix))
    each_once([lock], "export", str(lock), "--from-prefix", str(prefix), "--out", str(tmp_path / "from-prefix"))
    each_once([lock], "pack", str(lock), "--out", str(tmp_path / "env.tar"))


def test_a_manifests_bundle_is_read_once(lock: Path, tmp_path: Path) -> None:
    """`--manifests`: a check of an image reads the bundle before the pull and conforms after it from the same
    bytes; a check of a prefix binds its verdict to them; export and verify take it the same way."""
    image, prefix, bundle = tmp_path / "img", tmp_path / "env", tmp_path / "bundle.json.gz"
    invoke("manifests", str(lock), "--out", str(bundle))
    invoke("export", str(lock), "--out", str(image))
    invoke("materialize", str(lock), "--prefix", str(prefix))
    each_once([lock, bundle], "check", "--image", str(image), "--lock", str(lock), "--manifests", str(bundle))
    each_once([lock, bundle], "check", "--lock", str(lock), "--prefix", str(prefix), "--manifests", str(bundle))
    each_once(
        [lock, bundle], "check", "--lock", str(lock), "--prefix", str(prefix), "--manifests", str(bundle)
    )  # kept verdict
    each_once(
        [lock, bundle],
        "export",
        str(lock),
        "--from-prefix",
        str(prefix),
        "--manifests",
        str(bundle),
        "--out",
        str(tmp_path / "p"),
    )


def test_a_step_that_reads_the_lock_again_is_caught(
    lock: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The counts are not vacuous: a materialize step that re-reads the lock by its name (as it did before issue
    32), or a stack step that opens the stack a second time, fails the check."""
    from lockgen.adapters.lock import lockfile_yaml
    from lockgen.adapters.lock.stack_file import read_stack
    from lockgen.api.steps import materialize_steps, stack_steps

    monkeypatch.setattr(materialize_steps, "_parsed", lambda given: lockfile_yaml.read_lock(Path(given.source)))
    with pytest.raises(AssertionError, match="': 2"):
        each_once([lock], "materialize", str(lock), "--prefix", str(tmp_path / "env"))
    stack = lock.parent.parent / "stack.toml"
    monkeypatch.setattr(
        stack_steps,
        "read_stack",
        lambda path, fetch=None, text=None: (path.read_text(), read_stack(path, fetch, text))[1],
    )
    with pytest.raises(AssertionError, match="': 2"):
        each_once([stack, lock], "resolve", str(stack), "--check")


def test_the_recorder_is_inert_outside_its_block(lock: Path) -> None:
    with opened(lock) as counts:
        pass
    lock.read_bytes()
    assert dict(counts) == {str(lock): 0}
