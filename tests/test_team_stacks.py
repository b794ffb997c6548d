"""Team stacks on a base (`[stack] extends`): the base's lock held package for package under the team's solve,
a team requirement that would move a base package named (or, with `override = true`, recorded), and a team
lock reported stale when its base lock changed. Against a tiny channel of real packages the tests build."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lockgen.adapters.lock.lockfile_yaml import load_lock
from tests.channel_factory import Pkg, build_channel
from tests.conftest import run_cli

BASE_PACKAGES = [Pkg("tok", "0.21.4"), Pkg("base-lib", "1.0", depends=("tok",)), Pkg("teamtool", "1.0")]
LATER = [Pkg("tok", "0.22.1"), Pkg("trans", "1.0", depends=("tok >=0.22",))]  # published after the base was locked


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def platform(tmp_path: Path) -> tuple[Path, Path]:
    """(the channel, the base stack), the base resolved while the channel held only BASE_PACKAGES."""
    channel = build_channel(tmp_path / "channel", BASE_PACKAGES)
    base = write(
        tmp_path / "platform" / "stack.toml",
        f'[stack]\nname = "platform"\nchannels = ["{channel.as_uri()}"]\n[dependencies]\nbase-lib = '
        '"*"\n[targets.cpu]\narch = "cpu"\n',
    )
    assert run_cli("resolve", str(base)).returncode == 0
    build_channel(channel, BASE_PACKAGES + LATER)
    return channel, base


def versions(lock: Path) -> dict[str, str]:
    return {p.name: f"{p.version} {p.build}" for p in load_lock(lock).package}


def team(tmp_path: Path, deps: str, extra: str = "") -> Path:
    return write(
        tmp_path / "team" / "stack.toml",
        f'[stack]\nname = "team"\nextends = "../platform/stack.toml"\n{extra}\n[dependencies]\n{deps}\n',
    )


@pytest.mark.slow
def test_a_team_stack_holds_the_base_and_adds_its_own(tmp_path: Path, platform: tuple[Path, Path]) -> None:
    _, base = platform
    stack = team(tmp_path, 'teamtool = "*"')
    done = run_cli("resolve", str(stack))
    assert done.returncode == 0, done.stderr
    base_lock, team_lock = base.parent / "locks" / "cpu.conda-lock.yml", stack.parent / "locks" / "cpu.conda-lock.yml"
    held, mine = versions(base_lock), versions(team_lock)
    assert {name: mine[name] for name in held} == held and mine["tok"].startswith("0.21.4")  # 0.22.1 exists now
    assert set(mine) - set(held) == {"teamtool"}
    meta = load_lock(team_lock).metadata.custom_metadata
    assert meta["lockgen.extends"] == "../platform/stack.toml" and len(meta["lockgen.base-lock"]) == 64
    assert run_cli("resolve", str(stack), "--check").returncode == 0
    base.write_text(base.read_text().replace('base-lib = "*"', 'base-lib = "*"\ntok = "*"'))
    assert run_cli("resolve", str(base), "--update", "tok").returncode == 0  # the platform team moves tok
    stale = run_cli("resolve", str(stack), "--check")
    assert stale.returncode == 1 and "cpu: base-changed: " in stale.stdout, stale.stdout + stale.stderr


@pytest.mark.slow
def test_a_team_requirement_that_moves_the_base_is_named_or_recorded(
    tmp_path: Path, platform: tuple[Path, Path]
) -> None:
    stack = team(tmp_path, 'trans = "*"')
    refused = run_cli("resolve", str(stack))
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert "would move packages the base holds: cpu on linux-64: tok 0.21.4 -> 0.22.1" in refused.stderr, refused.stderr
    assert "override = true" in refused.stderr and not (stack.parent / "locks").exists()
    stack.write_text(
        stack.read_text().replace(
            'extends = "../platform/stack.toml"', 'extends = "../platform/stack.toml"\noverride = true'
        )
    )
    done = run_cli("resolve", str(stack))
    assert done.returncode == 0, done.stderr
    lock = stack.parent / "locks" / "cpu.conda-lock.yml"
    assert versions(lock)["tok"].startswith("0.22.1")
    assert load_lock(lock).metadata.custom_metadata["lockgen.base-moved.linux-64"] == "tok 0.21.4 -> 0.22.1"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (
            '[stack]\nname = "team"\nextends = "../platform/stack.toml"\n[dependencies]\nbase-lib = "*"\n',
            "is the base's dependency",
        ),
        (
            '[stack]\nname = "team"\nextends = "../platform/stack.toml"\nplatforms = '
            '["linux-64"]\n[dependencies]\nteamtool = "*"\n',
            "`platforms` comes from the base stack",
        ),
        (
            '[stack]\nname = "team"\nextends = "../platform/stack.toml"\n[dependencies]\nteamtool = '
            '"*"\n[targets.gpu]\narch = "sm90"\n',
            "[targets] comes from the base stack",
        ),
        (
            '[stack]\nname = "team"\nextends = "../nowhere/stack.toml"\n[dependencies]\nteamtool = "*"\n',
            "does not exist",
        ),
        ('[stack]\nname = "team"\nextends = "../platform/stack.toml"\n', "adds no dependencies"),
    ],
)
def test_a_bad_team_stack_is_one_error(tmp_path: Path, platform: tuple[Path, Path], text: str, fragment: str) -> None:
    stack = write(tmp_path / "team" / "stack.toml", text)
    done = run_cli("resolve", str(stack))
    assert done.returncode == 1 and fragment in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert not (stack.parent / "locks").exists()


def test_the_base_must_be_resolved_first(tmp_path: Path) -> None:
    channel = build_channel(tmp_path / "channel", BASE_PACKAGES)
    write(
        tmp_path / "platform" / "stack.toml",
        f'[stack]\nname = "platform"\nchannels = ["{channel.as_uri()}"]\n[dependencies]\nbase-lib = '
        '"*"\n[targets.cpu]\narch = "cpu"\n',
    )
    done = run_cli("resolve", str(team(tmp_path, 'teamtool = "*"')))
    assert done.returncode == 1 and "resolve the base first: lockgen resolve" in done.stderr, done.stderr


@pytest.mark.slow
def test_the_base_certificate_covers_a_team_lock_whose_cuda_stack_is_the_base_s(tmp_path: Path) -> None:
    import json

    from lockgen.adapters.node.signing import render
    from lockgen.digests import file_digest
    from tests.conftest import REPO

    channel = build_channel(tmp_path / "channel", [Pkg("pytorch", "2.5.0", build="cpu_h1_0"), Pkg("teamtool", "1.0")])
    base = write(
        tmp_path / "platform" / "stack.toml",
        f'[stack]\nname = "platform"\nchannels = ["{channel.as_uri()}"]\n[dependencies]\npytorch = '
        '"*"\n[targets.cpu]\narch = "cpu"\n',
    )
    assert run_cli("resolve", str(base)).returncode == 0
    body = json.loads((REPO / "envs" / "examples" / "h200-system" / "h200-lock-full.cert.json").read_text())[
        "certificate"
    ]
    body["subject"]["lock_sha256"] = file_digest(base.parent / "locks" / "cpu.conda-lock.yml")
    write(base.parent / "certs" / "cpu-sm90.cert.json", render({"certificate": body}))
    build_channel(
        channel,
        [
            Pkg("pytorch", "2.5.0", build="cpu_h1_0"),
            Pkg("pytorch", "2.6.0", build="cpu_h1_0"),
            Pkg("teamtool", "1.0"),
            Pkg("trans", "1.0", depends=("pytorch >=2.6",)),
        ],
    )
    same = team(tmp_path / "a", 'teamtool = "*"')
    same.parent.parent.joinpath("platform").symlink_to(base.parent)
    assert run_cli("resolve", str(same)).returncode == 0
    listed = run_cli("certs", str(same.parent))
    assert "[inherited by" in listed.stdout and "its CUDA stack is the base's" in listed.stdout, (
        listed.stdout + listed.stderr
    )
    moved = team(tmp_path / "b", 'trans = "*"', "override = true")
    moved.parent.parent.joinpath("platform").symlink_to(base.parent)
    assert run_cli("resolve", str(moved)).returncode == 0
    refused = run_cli("certs", str(moved.parent))
    assert "[inherited by" not in refused.stdout and "needs its own certification" in refused.stderr
    assert "pytorch 2.5.0 cpu_h1_0 -> 2.6.0 cpu_h1_0 on linux-64" in refused.stderr, refused.stderr


@pytest.mark.slow
def test_a_team_stack_on_a_missing_or_unreadable_lock_is_one_error(tmp_path: Path) -> None:
    stack = write(
        tmp_path / "team" / "stack.toml",
        '[stack]\nname = "team"\nextends = "../vendor/node.conda-lock.yml"\n[pypi-dependencies]\nsix = '
        '"*"\n[targets.node]\narch = "cpu"\n',
    )
    missing = run_cli("resolve", str(stack))
    assert missing.returncode == 1 and "the base lock" in missing.stderr and "does not exist" in missing.stderr
    write(tmp_path / "vendor" / "node.conda-lock.yml", "version: [not a lock\n")
    broken = run_cli("resolve", str(stack))
    assert broken.returncode == 1 and "error:" in broken.stderr and "Traceback" not in broken.stderr, broken.stderr


@pytest.mark.parametrize(
    "conda_python, recorded, expected",
    [("3.12.4", "3.11", "3.12"), ("3.12.4", "", "3.12"), (None, "3.11", "3.11"), (None, "", None)],
)
def test_a_lock_s_python_has_one_precedence_for_every_reader(
    tmp_path: Path, conda_python: str | None, recorded: str, expected: str | None
) -> None:
    """The conda python (the interpreter the environment runs, whose folder its wheels go into) over the version
    the lock records, which stands alone for a lock without one (a venv's): what export and check place wheels by
    is what a team stack on that lock takes as its Python."""
    from lockgen.adapters.lock.lockfile_yaml import dump_lock, read_lock
    from lockgen.adapters.lock.stack_file import lock_base
    from lockgen.core.env.expected_env import lock_python
    from lockgen.model.lock import Lock, LockedPackage, LockMetadata, PackageHash

    packages = (
        ()
        if conda_python is None
        else (
            LockedPackage(
                name="python",
                version=conda_python,
                manager="conda",
                platform="linux-64",
                build="h1_0_cpython",
                url=f"https://conda.anaconda.org/conda-forge/linux-64/python-{conda_python}-h1_0_cpython.conda",
                hash=PackageHash(sha256="ab" * 32),
            ),
        )
    )
    meta = {"lockgen.target": "cpu", **({"lockgen.python.linux-64": recorded} if recorded else {})}
    lock = Lock(
        metadata=LockMetadata(content_hash={}, channels=(), platforms=("linux-64",), sources=(), custom_metadata=meta),
        package=packages,
    )
    path = tmp_path / "base.conda-lock.yml"
    path.write_text(dump_lock(lock))
    assert lock_python(lock, "linux-64") == expected
    assert lock_base(read_lock(path), "stack.toml").python == expected


@settings(max_examples=80, deadline=None)
@given(
    st.from_regex(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,20}[A-Za-z0-9])?", fullmatch=True),
    st.from_regex(r"[0-9]{1,3}(\.[0-9]{1,3}){0,3}", fullmatch=True),
)
def test_a_wheel_s_layer_key_is_one_from_its_lock_entry_and_its_dist_info(name: str, version: str) -> None:
    """Export tells the base's layers by key: a lock entry's (`package_key`) and the dist-info folder the wheel
    installs (its name escaped as installers write it, `-`/`.` as `_`) must give the same one."""
    import re

    from lockgen.core.stack.team import dist_info_key, package_key
    from lockgen.model.lock import LockedPackage, PackageHash

    entry = LockedPackage(
        name=name,
        version=version,
        manager="pip",
        platform="linux-64",
        url=f"https://example.invalid/{name}-{version}-py3-none-any.whl",
        hash=PackageHash(sha256="ab" * 32),
    )
    folder = f"{re.sub(r'[-_.]+', '_', name)}-{version}.dist-info"
    assert dist_info_key(folder) == package_key(entry)


@pytest.mark.parametrize(
    "extends, expected, kind, image",
    [
        ("../platform/stack.toml", "../platform/locks/cpu.conda-lock.yml", "stack", None),
        ("../vendor/locks/node.conda-lock.yml", "../vendor/locks/node.conda-lock.yml", "lock", None),
        (
            "docker://registry.example/base@sha256:" + "ab" * 32,
            "locks/_base.conda-lock.yml",
            "image",
            "docker://registry.example/base@sha256:" + "ab" * 32,
        ),
        ("../base-img", "locks/_base.conda-lock.yml", "image", Path("/teams/ml/../base-img")),
    ],
)
def test_where_a_base_lock_is_has_one_answer(extends: str, expected: str, kind: str, image: object) -> None:
    """From the team stack (resolve, the stack reader: located once) and from a team lock file (export, certs):
    the same path."""
    from lockgen.core.stack.stack_layout import base_lock_of, located_base, team_lock_base

    team = Path("/teams/ml")
    base = located_base(team / "stack.toml", extends)
    assert (base.kind, base.image, base.is_lock) == (kind, image, kind != "stack")
    assert base_lock_of(base, "cpu") == team / expected
    assert team_lock_base(team / "locks" / "cpu.conda-lock.yml", extends, "cpu") == team / expected
