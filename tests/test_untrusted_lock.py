"""A lock from a pull request is input: every field is checked when the lock is read, the package behind an
entry must be the one the entry names, md5 alone proves nothing, and no URL keeps its credential. Each
attack is built here as an attacker would write it; none may touch a file outside lockgen's room, run a
program, or pass."""

from __future__ import annotations

import json
import os
import re
import shutil
import zipfile
from dataclasses import replace
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lockgen.adapters.lock.lockfile_yaml import checked_lock_text, dump_lock, load_lock, parse_lock, read_lock
from lockgen.api.materialize import materialize
from lockgen.errors import LockFormatError
from tests.channel_factory import Pkg, build_channel, cpu_lock
from tests.conftest import EXAMPLE_STACK, run_cli, unsealed
from tests.wheel_index import Wheel, build_wheel

CPU_LOCK = EXAMPLE_STACK.parent / "locks" / "cpu.conda-lock.yml"
PYPI_LOCK = EXAMPLE_STACK.parent.parent / "quickstart" / "locks" / "cpu.conda-lock.yml"


def _first_value(text: str, key: str) -> str:
    """The text of the first `key:` of the first package (or, for a `lockgen.*` key, of the metadata)."""
    start = 0 if key.startswith("lockgen") else text.index("\npackage:\n")
    return re.compile(rf"^[ -]*{key}: (.+)$", re.M).search(text, start).group(1)  # type: ignore[union-attr]


def _edited(tmp_path: Path, source: Path, old: str, new: str) -> Path:
    text = source.read_text()
    assert old in text
    edited = tmp_path / "edited.conda-lock.yml"
    edited.write_text(text.replace(old, new, 1))
    return edited


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LOCKGEN_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("mine\n")
    return victim


@pytest.mark.slow
@pytest.mark.parametrize("key", ["build", "version", "name"])
def test_a_build_version_or_name_that_climbs_is_refused_and_removes_nothing(
    tmp_path: Path, home: Path, key: str
) -> None:
    victim = _victim(tmp_path)
    text = CPU_LOCK.read_text()
    value = _first_value(text, key)
    climb = f"0/../../../../../../..{victim}"
    lock = _edited(tmp_path, CPU_LOCK, f"{key}: {value}\n", f"{key}: {climb}\n")
    result = run_cli("materialize", str(lock), "--prefix", str(tmp_path / "env"), env={"LOCKGEN_HOME": str(home)})
    assert result.returncode == 1 and "error: lock" in result.stderr and "hint:" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert (victim / "keep.txt").read_text() == "mine\n" and not (tmp_path / "env").exists()


@pytest.mark.slow
def test_a_sha256_that_is_a_path_never_reaches_the_manifest_cache(tmp_path: Path, home: Path) -> None:
    victim = _victim(tmp_path)
    sha = _first_value(CPU_LOCK.read_text(), "sha256")
    lock = _edited(tmp_path, CPU_LOCK, f"sha256: {sha}", f"sha256: ../../../../../../..{victim}/keep")
    for command in (
        ["check", "--lock", str(lock), "--prefix", str(tmp_path)],
        ["manifests", str(lock), "--out", str(tmp_path / "m.json")],
    ):
        result = run_cli(*command, env={"LOCKGEN_HOME": str(home)})
        assert result.returncode == 1 and "is not 64 lowercase hex digits" in result.stderr, result.stderr
    assert sorted(p.name for p in victim.iterdir()) == ["keep.txt"] and not (tmp_path / "m.json").exists()


@pytest.mark.slow
def test_a_target_that_is_a_path_never_places_the_environment(tmp_path: Path, home: Path) -> None:
    lock = _edited(tmp_path, PYPI_LOCK, "lockgen.target: cpu", "lockgen.target: x/../../../../escaped")
    result = run_cli("materialize", str(lock), env={"LOCKGEN_HOME": str(home)})
    assert result.returncode == 1 and "is not a target name" in result.stderr
    assert not list(tmp_path.glob("escaped*")) and not (home / "envs").exists()


@pytest.mark.slow
def test_a_python_that_is_a_program_is_never_run(tmp_path: Path, home: Path) -> None:
    marker = tmp_path / "ran"
    program = tmp_path / "program"
    program.write_text(f"#!/bin/sh\ntouch {marker}\n")
    program.chmod(0o755)
    python = _first_value(PYPI_LOCK.read_text(), "lockgen.python.linux-64")
    lock = _edited(tmp_path, PYPI_LOCK, f"lockgen.python.linux-64: {python}", f"lockgen.python.linux-64: {program}")
    result = run_cli("materialize", str(lock), "--prefix", str(tmp_path / "env"), env={"LOCKGEN_HOME": str(home)})
    assert result.returncode == 1 and "is not a Python version X.Y" in result.stderr
    assert not marker.exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    "injected", ["\n-r /etc/shadow", " --index-url http://127.0.0.1:9/", "\nevil @ file:///tmp/evil.whl"]
)
def test_a_url_that_holds_a_requirement_line_is_refused(tmp_path: Path, home: Path, injected: str) -> None:
    url = _first_value(PYPI_LOCK.read_text(), "url")
    quoted = '"' + (url + injected).replace("\n", "\\n") + '"'
    lock = _edited(tmp_path, PYPI_LOCK, f"url: {url}", f"url: {quoted}")
    result = run_cli("materialize", str(lock), "--prefix", str(tmp_path / "env"), env={"LOCKGEN_HOME": str(home)})
    assert result.returncode == 1 and "whitespace or control characters" in result.stderr, result.stderr
    assert "root:" not in result.stderr + result.stdout and not (tmp_path / "env").exists()


@pytest.mark.slow
def test_a_conda_entry_naming_another_version_than_its_archive_is_refused(tmp_path: Path, home: Path) -> None:
    """The lock says hello-data 9.9.9; the URL and the hash are 1.0's archive. Renamed on the mirror, the file
    name agrees with the entry, and the archive's own info/index.json still says 1.0."""
    channel = build_channel(
        tmp_path / "channel", [Pkg("hello-data", "1.0", subdir="noarch", files={"share/hello.txt": "1\n"})]
    )
    lock = cpu_lock(tmp_path, channel.as_uri(), ["hello-data"])
    text = lock.read_text()
    lied = tmp_path / "lied.conda-lock.yml"
    lied.write_text(
        unsealed(text.replace("version: '1.0'", "version: 9.9.9").replace('version: "1.0"', "version: 9.9.9"))
    )
    assert "9.9.9" in lied.read_text()
    with pytest.raises(LockFormatError, match="not this entry's archive"):
        load_lock(lied)
    renamed = channel / "noarch" / "hello-data-9.9.9-h0_0.conda"
    shutil.copy(channel / "noarch" / "hello-data-1.0-h0_0.conda", renamed)
    lied.write_text(lied.read_text().replace("hello-data-1.0-h0_0.conda", renamed.name))
    with pytest.raises(LockFormatError, match=r"info/index.json says `hello-data 1.0 h0_0`"):
        materialize(lied, None, tmp_path / "env", lambda _: None)
    assert not (tmp_path / "env").exists()
    result = run_cli(
        "check", "--lock", str(lied), "--prefix", str(tmp_path), env={"LOCKGEN_HOME": str(tmp_path / "home2")}
    )
    assert result.returncode == 1 and "info/index.json says" in result.stderr


def test_a_wheel_renamed_to_another_version_is_refused(tmp_path: Path, home: Path) -> None:
    """demo 2.0 pinned to demo-1.0's wheel, renamed demo-2.0-…whl: its METADATA and dist-info still say 1.0."""
    from lockgen.api.steps.manifest_steps import manifest_of
    from lockgen.digests import file_digest
    from lockgen.model.lock import LockedPackage, PackageHash

    honest = build_wheel(Wheel("demo", "1.0"), tmp_path)
    renamed = honest.rename(tmp_path / "demo-2.0-py3-none-any.whl")
    entry = LockedPackage(
        name="demo",
        version="2.0",
        manager="pip",
        platform="linux-64",
        url=renamed.as_uri(),
        hash=PackageHash(sha256=file_digest(renamed)),
    )
    with pytest.raises(LockFormatError, match=re.escape("dist-info folder says `demo-1.0.dist-info`")):
        manifest_of(entry, {})
    honest_entry = replace(entry, version="1.0", url=(tmp_path / "demo-1.0-py3-none-any.whl").as_uri())
    shutil.copy(renamed, tmp_path / "demo-1.0-py3-none-any.whl")
    assert manifest_of(honest_entry, {})[0].version == "1.0"
    with pytest.raises(LockFormatError, match=r"manifest .read from the file itself. says `demo 1.0`"):
        manifest_of(entry, {})  # the kept manifest of that hash names 1.0: a second entry cannot rename it


def test_a_wheel_whose_metadata_disagrees_with_its_dist_info_is_refused(tmp_path: Path, home: Path) -> None:
    from lockgen.api.steps.manifest_steps import manifest_of
    from lockgen.digests import file_digest
    from lockgen.model.lock import LockedPackage, PackageHash

    wheel = build_wheel(Wheel("demo", "1.0"), tmp_path)
    forged = _rewritten(
        wheel,
        tmp_path / "forged",
        lambda name, data: data.replace(b"Name: demo", b"Name: other") if name.endswith("METADATA") else data,
    )
    entry = LockedPackage(
        name="demo",
        version="1.0",
        manager="pip",
        platform="linux-64",
        url=forged.as_uri(),
        hash=PackageHash(sha256=file_digest(forged)),
    )
    with pytest.raises(LockFormatError, match=re.escape("METADATA says `other 1.0`")):
        manifest_of(entry, {})


@pytest.mark.slow
def test_an_md5_only_entry_is_refused_unless_allowed(tmp_path: Path, home: Path) -> None:
    channel = build_channel(
        tmp_path / "channel", [Pkg("hello-data", "1.0", subdir="noarch", files={"share/hello.txt": "1\n"})]
    )
    lock = cpu_lock(tmp_path, channel.as_uri(), ["hello-data"])
    text = lock.read_text()
    sha = _first_value(text, "sha256")
    md5_only = tmp_path / "md5.conda-lock.yml"
    md5_only.write_text(unsealed("".join(line for line in text.splitlines(keepends=True) if sha not in line)))
    assert "md5:" in md5_only.read_text() and "sha256:" not in md5_only.read_text().split("package:")[1]
    refused = run_cli("materialize", str(md5_only), "--prefix", str(tmp_path / "env"), env={"LOCKGEN_HOME": str(home)})
    assert refused.returncode == 1 and "is pinned by md5 only" in refused.stderr and "--allow-md5" in refused.stderr
    assert not (tmp_path / "env").exists()
    allowed = run_cli(
        "materialize", str(md5_only), "--prefix", str(tmp_path / "env"), "--allow-md5", env={"LOCKGEN_HOME": str(home)}
    )
    assert allowed.returncode == 0, allowed.stderr
    assert (tmp_path / "env" / "share" / "hello.txt").read_text() == "1\n"


@pytest.mark.slow
def test_a_file_url_never_reveals_the_hash_of_what_it_names(tmp_path: Path, home: Path) -> None:
    """A lock naming a local file the lock did not bring (here one the attacker cannot read, renamed into the
    entry's archive name) gets a refusal that does not print the file's digest."""
    channel = build_channel(
        tmp_path / "channel", [Pkg("hello-data", "1.0", subdir="noarch", files={"share/hello.txt": "1\n"})]
    )
    lock = cpu_lock(tmp_path, channel.as_uri(), ["hello-data"])
    secret = channel / "noarch" / "hello-data-1.0-h0_0.conda"
    secret.write_bytes(b"root:$y$j9T$secret\n")
    import hashlib

    result = run_cli("materialize", str(lock), "--prefix", str(tmp_path / "env"), env={"LOCKGEN_HOME": str(home)})
    assert result.returncode == 1 and "does not have the sha256 the lock pins" in result.stderr
    assert hashlib.sha256(secret.read_bytes()).hexdigest() not in result.stderr + result.stdout


def test_tokens_never_reach_a_lock_from_any_source(tmp_path: Path) -> None:
    """A PyPI index's `/t/<token>/` and `user:pass@` in every URL of a foreign lock are gone from the lock
    lockgen writes (the fetchers put the host's credential back from netrc or the auth file)."""
    source = Path(__file__).parent / "fixtures" / "foreign" / "tiny.pixi.lock"
    text = source.read_text()
    hosts = set(re.findall(r"https://([^/\s]+)/", text))
    assert hosts
    for host in hosts:
        text = text.replace(f"https://{host}/", f"https://me:hunter2@{host}/t/tk-SECRET-42/")
    secretive = tmp_path / "secret.pixi.lock"
    secretive.write_text(text)
    result = run_cli("import", str(secretive), "--target", "t", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    written = (tmp_path / "locks" / "t.conda-lock.yml").read_text()
    assert "hunter2" not in written and "tk-SECRET-42" not in written and "/t/" not in written
    assert "hunter2" not in result.stderr + result.stdout and "tk-SECRET-42" not in result.stderr + result.stdout


def test_read_lock_binds_the_digest_to_the_bytes_it_parsed(tmp_path: Path) -> None:
    import hashlib

    loaded = read_lock(CPU_LOCK)
    assert loaded.sha256 == hashlib.sha256(CPU_LOCK.read_bytes()).hexdigest() and loaded.data == CPU_LOCK.read_bytes()
    assert dump_lock(loaded.lock).encode() == loaded.data


_FIELDS = (
    "name",
    "version",
    "build",
    "url",
    "sha256",
    "md5",
    "platform",
    "category",
    "lockgen.target",
    "lockgen.python.linux-64",
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(field=st.sampled_from(_FIELDS), value=st.text(min_size=0, max_size=80))
def test_any_field_is_loaded_checked_or_refused_as_one_error(field: str, value: str) -> None:
    """Whatever a field holds, reading the lock either refuses it with LockFormatError or gives values that
    are safe where they go: names, versions and builds never hold a `/` or a control character, hashes are
    hex of their length, URLs hold no whitespace."""
    text = (PYPI_LOCK if field.startswith("lockgen.python") else CPU_LOCK).read_text()
    old = _first_value(text, re.escape(field))
    start = 0 if field.startswith("lockgen") else text.index("\npackage:\n")
    fuzzed = text[:start] + text[start:].replace(f"{field}: {old}\n", f"{field}: {json.dumps(value)}\n", 1)
    try:
        lock = parse_lock(fuzzed, "fuzzed")
    except LockFormatError:
        return
    for package in lock.package:
        for part in (package.name, package.version, package.build or ""):
            assert "/" not in part and not re.search(r"[\x00-\x1f]", part) and part not in (".", "..")
        assert package.hash.sha256 is None or re.fullmatch(r"[0-9a-f]{64}", package.hash.sha256)
        assert package.hash.md5 is None or re.fullmatch(r"[0-9a-f]{32}", package.hash.md5)
        assert not re.search(r"\s", package.url)
    assert "/" not in lock.meta("target")
    assert all(
        re.fullmatch(r"\d\.\d+", v) for k, v in lock.metadata.custom_metadata.items() if k.startswith("lockgen.python.")
    )


def test_written_locks_are_checked_before_a_byte_is_written(tmp_path: Path) -> None:
    lock = load_lock(CPU_LOCK)
    bad = replace(lock, package=(replace(lock.package[0], build="../x"), *lock.package[1:]))
    with pytest.raises(LockFormatError, match="is not a conda build string") as refused:
        checked_lock_text(bad, "a test", "correct the test's input")
    assert os.listdir(tmp_path) == []
    # a lock that was never written is not re-created or left unedited: the hint names the input it came from
    assert refused.value.hint == "correct the test's input"


def test_a_netrc_or_auth_file_that_does_not_parse_never_shows_a_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lockgen.adapters import fetch_auth
    from lockgen.errors import UserError

    netrc_file = tmp_path / "netrc"
    netrc_file.write_text("machine pypi.example.org login me password hunter2 secret-tail\n")
    monkeypatch.setenv("NETRC", str(netrc_file))
    with pytest.raises(UserError) as caught:
        fetch_auth.authorized("https://pypi.example.org/simple/")
    assert (
        "does not parse at line" in caught.value.message
        and "secret-tail" not in caught.value.message + caught.value.hint
    )
    auth = tmp_path / "auth.json"
    auth.write_text('{"pypi.example.org": {"BasicHTTP": {"username": "me", "password": "hunter2"}} trailing-secret')
    monkeypatch.setenv("RATTLER_AUTH_FILE", str(auth))
    with pytest.raises(UserError) as caught:
        fetch_auth.authorized("https://pypi.example.org/simple/")
    assert "does not parse" in caught.value.message and "secret" not in caught.value.message + caught.value.hint


def _rewritten(
    wheel: Path, folder: Path, edit: Callable[[str, bytes], bytes], added: dict[str, bytes] | None = None
) -> Path:
    """A copy of `wheel` in `folder` (same file name) with each member passed through `edit`, plus `added`
    members its RECORD does not list."""
    folder.mkdir()
    copy = folder / wheel.name
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(copy, "w") as out:
        for info in source.infolist():
            out.writestr(info, edit(info.filename, source.read(info)))
        for name, data in (added or {}).items():
            out.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data)
    return copy


def _pip_lock(tmp_path: Path, wheel: Path) -> Path:
    """The quickstart lock's metadata with one pip entry: `wheel`, by its file URL and sha256."""
    from lockgen.digests import file_digest

    head = PYPI_LOCK.read_text().split("package:\n")[0]
    name, version = wheel.name.split("-")[:2]
    entry = (
        f'package:\n- name: {name}\n  version: "{version}"\n  manager: pip\n  platform: linux-64\n'
        f"  dependencies: {{}}\n  url: {wheel.as_uri()}\n  hash:\n    sha256: {file_digest(wheel)}\n"
        "  category: main\n  optional: false\n"
    )
    lock = tmp_path / "pip.conda-lock.yml"
    lock.write_text(unsealed(head + entry))  # a lock made by hand: without the package-set record of the one it copies
    return lock


@pytest.mark.slow
def test_a_wheel_file_its_record_does_not_list_fails_materialize(tmp_path: Path, home: Path) -> None:
    honest = build_wheel(Wheel("demo", "1.0"), tmp_path)
    smuggled = _rewritten(
        honest, tmp_path / "smuggled", lambda name, data: data, {"demo/sitecustomize_hook.py": b"import os\n"}
    )
    assert materialize(_pip_lock(tmp_path, honest), None, tmp_path / "honest-env", lambda _: None)[0].is_dir()
    result = run_cli(
        "materialize",
        str(_pip_lock(tmp_path, smuggled)),
        "--prefix",
        str(tmp_path / "env"),
        env={"LOCKGEN_HOME": str(home)},
    )
    assert (
        result.returncode == 1
        and "files no package states; first lib/python3.11/site-packages/demo/sitecustomize_hook.py" in result.stderr
    ), result.stderr
    assert not (tmp_path / "env").exists()


@pytest.mark.slow
def test_a_wheel_s_exec_bits_are_uv_s_and_a_dropped_one_is_named(tmp_path: Path, home: Path) -> None:
    """uv, the oracle, installs a wheel member whose Unix mode has an exec bit executable, and every
    `.data/scripts` file (whatever its mode in the zip); `check --lock` expects exactly that, and names a
    `chmod -x` of the executable member (same bytes: it passed before)."""
    from lockgen.api.check import check_lock
    from lockgen.model.requests import Prefix

    files = {
        "demo/tool.sh": "#!/bin/sh\necho tool\n",
        "demo/data.txt": "data\n",
        "demo-1.0.data/scripts/run": "#!/bin/sh\necho run\n",
    }
    plain = build_wheel(Wheel("demo", "1.0", files=files), tmp_path)
    modes = {"demo/tool.sh": 0o755, "demo/data.txt": 0o644, "demo-1.0.data/scripts/run": 0o644}
    wheel = tmp_path / "moded" / plain.name
    wheel.parent.mkdir()
    with zipfile.ZipFile(plain) as source, zipfile.ZipFile(wheel, "w") as out:
        for info in source.infolist():
            info.external_attr = modes.get(info.filename, 0o644) << 16
            out.writestr(info, source.read(info))
    lock = _pip_lock(tmp_path, wheel)
    prefix, _ = materialize(lock, None, tmp_path / "env", lambda _: None)
    site = next((prefix / "lib").glob("python3*/site-packages"))
    landed = {
        path: bool((path).stat().st_mode & 0o111)
        for path in (site / "demo" / "tool.sh", site / "demo" / "data.txt", prefix / "bin" / "run")
    }
    assert list(landed.values()) == [True, False, True], landed
    assert check_lock(lock, Prefix(prefix)).clean
    (site / "demo" / "tool.sh").chmod(0o644)
    result = check_lock(lock, Prefix(prefix))
    assert not result.clean and [p.exec_bit for p in result.report.packages] == [
        (f"{site.relative_to(prefix)}/demo/tool.sh",)
    ]


def test_two_conda_packages_installing_one_path_fail_materialize(tmp_path: Path, home: Path) -> None:
    channel = build_channel(
        tmp_path / "channel",
        [
            Pkg("first", "1.0", subdir="noarch", files={"share/same.txt": "1\n"}),
            Pkg("second", "1.0", subdir="noarch", files={"share/same.txt": "2\n"}),
        ],
    )
    lock = cpu_lock(tmp_path, channel.as_uri(), ["first", "second"])
    with pytest.raises(LockFormatError, match=r"two packages of the lock install share/same.txt"):
        materialize(lock, None, tmp_path / "env", lambda _: None)
    assert not (tmp_path / "env").exists()


@pytest.mark.slow
def test_file_capabilities_are_drift_for_both_checks(tmp_path: Path, home: Path) -> None:
    """`setcap cap_setuid+ep` changes no byte and no mode bit, yet the program may then become root."""
    channel = build_channel(tmp_path / "channel", [Pkg("tool", "1.0", files={"bin/tool": "#!/bin/sh\necho tool\n"})])
    lock = cpu_lock(tmp_path, channel.as_uri(), ["tool"])
    prefix, _ = materialize(lock, None, tmp_path / "env", lambda _: None)
    clean = run_cli("check", "--lock", str(lock), "--prefix", str(prefix), env={"LOCKGEN_HOME": str(home)})
    assert clean.returncode == 0, clean.stdout + clean.stderr
    setcap = shutil.which("setcap") or "/usr/sbin/setcap"
    import subprocess

    subprocess.run([setcap, "cap_setuid+ep", str(prefix / "bin" / "tool")], check=True)
    drift = run_cli("check", "--prefix", str(prefix), env={"LOCKGEN_HOME": str(home)})
    assert drift.returncode == 1 and "bin/tool (file capabilities (security.capability))" in drift.stdout, drift.stdout
    proven = run_cli("check", "--lock", str(lock), "--prefix", str(prefix), env={"LOCKGEN_HOME": str(home)})
    assert (
        proven.returncode == 1
        and "bin/tool is setuid, setgid, sticky, world-writable or carries file capabilities" in proven.stdout
    ), proven.stdout


@pytest.mark.slow
def test_capabilities_of_a_file_made_executable_later_are_found(tmp_path: Path, home: Path) -> None:
    """Attributes are read only of files someone can run (execve refuses a file with no execute bit, root
    included, so capabilities give it nothing): a `chmod +x` keeps them, and moves the ctime that every kept
    verdict and fingerprint covers, so the next check of either kind reads them and fails."""
    import subprocess
    import time

    channel = build_channel(tmp_path / "channel", [Pkg("data", "1.0", files={"share/data.txt": "not a program\n"})])
    lock = cpu_lock(tmp_path, channel.as_uri(), ["data"])
    prefix, _ = materialize(lock, None, tmp_path / "env", lambda _: None)
    target = prefix / "share" / "data.txt"
    assert target.stat().st_mode & 0o111 == 0
    subprocess.run([shutil.which("setcap") or "/usr/sbin/setcap", "cap_setuid+ep", str(target)], check=True)
    time.sleep(1.1)  # settled: both checks keep their clean verdict of this tree
    env = {"LOCKGEN_HOME": str(home)}
    for _ in range(2):  # the work, then its kept verdict
        assert run_cli("check", "--lock", str(lock), "--prefix", str(prefix), env=env).returncode == 0
        assert run_cli("check", "--prefix", str(prefix), env=env).returncode == 0
    target.chmod(0o755)
    assert os.getxattr(target, "security.capability")  # chmod keeps them
    proven = run_cli("check", "--lock", str(lock), "--prefix", str(prefix), env=env)
    assert (
        proven.returncode == 1
        and "share/data.txt is setuid, setgid, sticky, world-writable or carries file capabilities" in proven.stdout
    ), proven.stdout
    drift = run_cli("check", "--prefix", str(prefix), env=env)
    assert drift.returncode == 1 and "share/data.txt (file capabilities (security.capability))" in drift.stdout, (
        drift.stdout
    )


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["timestamp", "unchecked-hash", "checked-hash"])
def test_byte_code_beside_a_proven_source_must_be_its_byte_code(tmp_path: Path, home: Path, mode: str) -> None:
    """Python runs a .pyc whose header matches (timestamp), or always (unchecked hash), or when the source's
    hash matches (checked hash) without compiling the source: other code in it ran while both checks passed."""
    import marshal
    import py_compile
    import sys

    honest = build_wheel(Wheel("demo", "1.0"), tmp_path)
    lock = _pip_lock(tmp_path, honest)
    prefix, _ = materialize(lock, None, tmp_path / "env", lambda _: None)
    source = prefix / "lib" / "python3.11" / "site-packages" / "demo" / "__init__.py"
    cached = source.parent / "__pycache__" / f"__init__.{sys.implementation.cache_tag}.pyc"
    invalidation = {
        "timestamp": py_compile.PycInvalidationMode.TIMESTAMP,
        "unchecked-hash": py_compile.PycInvalidationMode.UNCHECKED_HASH,
        "checked-hash": py_compile.PycInvalidationMode.CHECKED_HASH,
    }[mode]
    py_compile.compile(str(source), cfile=str(cached), doraise=True, invalidation_mode=invalidation)
    for command in (["check", "--prefix", str(prefix)], ["check", "--lock", str(lock), "--prefix", str(prefix)]):
        honest_run = run_cli(*command, env={"LOCKGEN_HOME": str(home)})
        assert honest_run.returncode == 0, honest_run.stdout + honest_run.stderr
    evil = compile("OTHER_CODE = True", str(source), "exec")
    cached.write_bytes(cached.read_bytes()[:16] + marshal.dumps(evil))
    ran = subprocess_run(
        [str(prefix / "bin" / "python"), "-c", "import demo, sys; print(getattr(demo, 'VERSION', 'other code'))"]
    )
    assert ran == "other code"  # Python did run the byte code, not the source
    drift = run_cli("check", "--prefix", str(prefix), env={"LOCKGEN_HOME": str(home)})
    assert drift.returncode == 1 and "__init__" in drift.stdout and "not the byte code of its source" in drift.stdout, (
        drift.stdout
    )
    proven = run_cli("check", "--lock", str(lock), "--prefix", str(prefix), env={"LOCKGEN_HOME": str(home)})
    assert proven.returncode == 1 and "byte code: lib/python3.11/site-packages/demo/__pycache__/" in proven.stdout, (
        proven.stdout
    )


def subprocess_run(command: list[str]) -> str:
    import subprocess

    return subprocess.run(command, capture_output=True, text=True, timeout=60).stdout.strip()


@pytest.mark.slow
def test_a_file_url_outside_the_users_roots_is_never_read(tmp_path: Path, home: Path) -> None:
    """A lock names a local file by a file: URL; lockgen reads it only under $LOCKGEN_FILE_ROOTS, links resolved
    (the suite's roots are the temporary folder and the repository)."""
    channel = build_channel(
        tmp_path / "channel", [Pkg("hello-data", "1.0", subdir="noarch", files={"share/hello.txt": "1\n"})]
    )
    lock = cpu_lock(tmp_path, channel.as_uri(), ["hello-data"])
    elsewhere = {"LOCKGEN_HOME": str(home), "LOCKGEN_FILE_ROOTS": str(tmp_path / "somewhere-else")}
    refused = run_cli("materialize", str(lock), "--prefix", str(tmp_path / "env"), env=elsewhere)
    assert refused.returncode == 1 and "outside the folders lockgen reads local packages from" in refused.stderr
    assert f"export LOCKGEN_FILE_ROOTS={channel / 'noarch'}" in refused.stderr and not (tmp_path / "env").exists()
    (tmp_path / "somewhere-else").mkdir()
    (tmp_path / "somewhere-else" / "noarch").symlink_to(channel / "noarch")  # a link inside a root, out of it
    linked = lock.read_text().replace(channel.as_uri(), (tmp_path / "somewhere-else").as_uri())
    (tmp_path / "linked.conda-lock.yml").write_text(linked)
    through = run_cli(
        "materialize", str(tmp_path / "linked.conda-lock.yml"), "--prefix", str(tmp_path / "env"), env=elsewhere
    )
    assert through.returncode == 1 and "outside the folders lockgen reads local packages from" in through.stderr
    named = run_cli(
        "materialize",
        str(lock),
        "--prefix",
        str(tmp_path / "env"),
        env={**elsewhere, "LOCKGEN_FILE_ROOTS": str(channel)},
    )
    assert named.returncode == 0, named.stderr


_TEAM_LOCK = (
    Path(__file__).resolve().parent.parent
    / "envs"
    / "examples"
    / "team-jupyter"
    / "team"
    / "locks"
    / "cpu.conda-lock.yml"
)


def _cut(text: str, name: str) -> str:
    """The lock's text without the entry of `name`, as a hand edit leaves it."""
    start = text.index(f"- name: {name}\n")
    end = text.index("\n- name: ", start + 1) + 1
    return text[:start] + text[end:]


@pytest.mark.parametrize(
    "edit, words",
    [
        (
            lambda text: _cut(text, "pygments"),
            "its linux-64 entries are not the ones lockgen wrote (91 entries now, 92 when written)",
        ),
        (
            lambda text: text.replace("sha256: a9462224a505", "sha256: b9462224a505", 1),
            "(92 entries, as written, one or more of them edited)",
        ),
    ],
    ids=["an entry cut", "a hash edited"],
)
def test_a_lock_cut_or_edited_by_hand_is_refused_when_read(edit, words: str) -> None:
    """issue 44: with pygments cut from a lock, materialize succeeded, `resolve --check` said fresh and `import
    rich.syntax` failed later. Every lock lockgen writes records each platform's entry count and their digest."""
    text = _TEAM_LOCK.read_text()
    assert parse_lock(text, "team.lock").packages_for("linux-64")  # the lock as written reads
    with pytest.raises(LockFormatError, match=re.escape(words)) as refused:
        parse_lock(edit(text), "team.lock")
    assert "never edited by hand" in refused.value.hint


def test_a_cut_lock_is_refused_by_materialize_and_resolve_check(tmp_path: Path, home: Path) -> None:
    stack = tmp_path / "team"
    shutil.copytree(_TEAM_LOCK.parent.parent, stack)
    shutil.copytree(_TEAM_LOCK.parent.parent.parent / "platform", tmp_path / "platform")
    lock = stack / "locks" / "cpu.conda-lock.yml"
    lock.write_text(_cut(lock.read_text(), "pygments"))
    for args in (
        ["materialize", str(lock), "--prefix", str(tmp_path / "env")],
        ["resolve", str(stack / "stack.toml"), "--check"],
    ):
        done = run_cli(*args)
        assert (
            done.returncode == 1
            and "entries are not the ones lockgen wrote (91 entries now, 92 when written)" in done.stderr
        ), (args, done.stderr)
        assert "Traceback" not in done.stderr
    assert not (tmp_path / "env").exists()


def test_a_pypi_version_is_judged_by_its_own_text_whatever_was_judged_before() -> None:
    """The lock check parses each distinct PEP 440 version once (`lock_fields._pep440`): a version that is none is
    refused after the same entry's good one, and the versions remembered stay bounded."""
    from lockgen.core.lock import lock_fields
    from lockgen.errors import LockFieldError
    from lockgen.model.lock import pip_wheel

    def entry(version: str) -> object:
        return pip_wheel("pkg", version, "linux-64", f"https://files.example/pkg-{version}-py3-none-any.whl", "0" * 64)

    long_version = "1." + ".".join(["0"] * 40)  # over the longest remembered: parsed every time, accepted
    for version in ("1.0", "1.0", long_version, long_version):
        lock_fields.check_package(entry(version), "test.lock")  # type: ignore[arg-type]
    for version in ("1.0+", "1.0.x", "v1..0"):
        with pytest.raises(LockFieldError, match="is not a PEP 440 version"):
            lock_fields.check_package(entry(version), "test.lock")  # type: ignore[arg-type]
    for number in range(lock_fields._PEP440_SEEN_AT_MOST + 10):
        assert lock_fields._pep440(f"{number}.0")
    assert len(lock_fields._PEP440_SEEN) <= lock_fields._PEP440_SEEN_AT_MOST
    assert long_version not in lock_fields._PEP440_SEEN


_ENTRIES = st.lists(
    st.tuples(
        st.sampled_from(["linux-64", "linux-aarch64", "osx-arm64"]),
        st.sampled_from(["pip", "conda"]),
        st.text("ab", max_size=2),
    ),
    max_size=8,
)


@given(_ENTRIES, st.booleans())
def test_a_package_listed_twice_for_a_platform_is_refused_in_any_order(
    entries: list[tuple[str, str, str]], ordered: bool
) -> None:
    """A lock naming a package twice for one platform, or an entry of a platform it does not list, is refused,
    naming the first such entry, whatever the entries' order: in lockgen's order only each entry's predecessor is
    compared (no set of every entry is held), out of it each is looked up among all before it, as before."""
    from lockgen.core.lock.lock_fields import _check_once_each
    from lockgen.errors import LockFieldError
    from lockgen.model.lock import Lock, LockedPackage, LockMetadata, PackageHash

    if ordered:
        entries = sorted(entries)
    packages = tuple(
        LockedPackage(name=f"n{name}", version="1", manager=manager, platform=platform, url="", hash=PackageHash())  # type: ignore[arg-type]
        for platform, manager, name in entries
    )
    platforms = ("linux-64", "linux-aarch64")
    metadata = LockMetadata(content_hash={}, channels=(), platforms=platforms, sources=(), custom_metadata={})
    lock = Lock(metadata=metadata, package=packages)
    expected = None  # the rule, as a set of every entry seen
    seen: set[tuple[str, str, str]] = set()
    for platform, manager, name in entries:
        if platform == "osx-arm64":
            expected = f"{manager} package `n{name}`: its platform `osx-arm64` is not among metadata.platforms"
            break
        if (platform, manager, name) in seen:
            expected = f"holds {manager} package `n{name}` twice for {platform}"
            break
        seen.add((platform, manager, name))
    if expected is None:
        _check_once_each(lock, "x")
        return
    with pytest.raises(LockFieldError, match=re.escape(expected)):
        _check_once_each(lock, "x")


def test_a_lock_in_lockgen_s_order_is_checked_without_a_record_per_entry() -> None:
    """The check of a lock whose entries are in lockgen's order holds nothing per entry beyond a list of them for
    its package sets (a set of every entry's identity was about 90 bytes an entry: 600k entries at 300k packages)."""
    import tracemalloc

    from lockgen.core.lock.lock_fields import check_lock
    from lockgen.model.lock import Lock, LockMetadata, pip_wheel

    entries = 20_000
    packages = tuple(
        pip_wheel(f"p{i:05}", "1.0", "linux-64", f"https://files.example/p{i:05}-1.0-py3-none-any.whl", f"{i:064x}")
        for i in range(entries)
    )
    metadata = LockMetadata(content_hash={}, channels=(), platforms=("linux-64",), sources=(), custom_metadata={})
    lock = Lock(metadata=metadata, package=packages)
    check_lock(lock, "x")  # the caches every check fills (bounded)
    tracemalloc.start()
    try:
        check_lock(lock, "x")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak / entries < 40, peak / entries
