"""No credential a user wrote into a URL reaches a lock, stdout or stderr (found by an attack battery): a lock
that carries one is refused without echoing it, what `import` leaves out is named with its URLs scrubbed, and
the scrubber itself survives URLs that do not parse. The oracle for "no leak" is the secret's own text: it
must appear in no output and no file written."""

from __future__ import annotations

from pathlib import Path
from unittest.mock import patch
from urllib.parse import urlsplit

from hypothesis import example, given, settings
from hypothesis import strategies as st

from lockgen.core.credentials import carries_credential, scrub_url
from tests.conftest import run_cli

SECRET = "s3cretPW"
QUICKSTART = (
    Path(__file__).resolve().parent.parent / "envs" / "examples" / "quickstart" / "locks" / "cpu.conda-lock.yml"
)


def _leaks(*texts: str) -> bool:
    return any(SECRET in text or "tk-SECRETTOKEN" in text for text in texts)


def test_a_lock_carrying_a_credential_is_refused_without_echoing_it(tmp_path: Path) -> None:
    original = QUICKSTART.read_text()
    assert "https://files.pythonhosted.org/" in original
    variants = {
        "userinfo": original.replace(
            "https://files.pythonhosted.org/", f"https://alice:{SECRET}@files.pythonhosted.org/", 1
        ),
        "token": original.replace(
            "https://files.pythonhosted.org/packages/", "https://files.pythonhosted.org/t/tk-SECRETTOKEN/packages/", 1
        ),
    }
    for name, text in variants.items():
        lock = tmp_path / f"{name}.conda-lock.yml"
        lock.write_text(text)
        for command in (
            ("render", str(lock), "-f", "requirements"),
            ("render", str(lock), "-f", "pylock", "-o", str(tmp_path / f"{name}.toml")),
            ("diff", str(QUICKSTART), str(lock)),
        ):
            result = run_cli(*command)
            assert (
                result.returncode in (1, 2) and "carries a credential" in result.stderr and "hint:" in result.stderr
            ), (command, result.stderr)
            assert not _leaks(result.stdout, result.stderr), (command, result.stdout, result.stderr)
        assert not (tmp_path / f"{name}.toml").exists()


def test_import_names_what_it_left_out_without_credentials(tmp_path: Path) -> None:
    pixi = tmp_path / "pixi.lock"
    pixi.write_text(
        "version: 6\nenvironments:\n  default:\n    channels:\n    - url: "
        "https://conda.anaconda.org/conda-forge/\n    packages:\n      linux-64:\n"
        "      - conda: https://conda.anaconda.org/conda-forge/linux-64/bzip2-1.0.8-hda65f42_9.conda\n"
        f"      - pypi: git+https://oauth2:{SECRET}@gitlab.com/team/private.git@abc123\n"
        "packages:\n- conda: https://conda.anaconda.org/conda-forge/linux-64/bzip2-1.0.8-hda65f42_9.conda\n"
        "  sha256: 0b75d45f0bba3e95dc693336fa51f40ea28c980131fec438afb7ce6118ed05f6\n  md5: "
        "d2ffd7602c02f2b316fd921d39876885\n"
        "  depends:\n  - __glibc >=2.17,<3.0.a0\n  license: bzip2-1.0.6\n"
        f"- pypi: git+https://oauth2:{SECRET}@gitlab.com/team/private.git@abc123\n  name: private\n  version: 0.1.0\n"
    )
    out = tmp_path / "imported.conda-lock.yml"
    result = run_cli("import", str(pixi), "-t", "t1", "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert "gitlab.com/team/private.git" in result.stderr + out.read_text()  # what was left out is still named
    assert not _leaks(result.stdout, result.stderr, out.read_text())
    assert run_cli("render", str(out)).returncode == 0  # and the lock it wrote reads back


_HOSTS = st.sampled_from(["example.com", "127.0.0.1", "[::1]", "[evil]", "[", "host:abc", ""])


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["https", "http", "file", "git+https"]),
    st.sampled_from(
        ["", "u@", f"u:{SECRET}@", f":{SECRET}@", f"u:pa@{SECRET}@"]
    ),  # an `@` in the password too (found by a review)
    _HOSTS,
    st.text(alphabet="/abt-_.@?=&", max_size=20),
)
def test_scrubbing_never_raises_and_leaves_no_password(scheme: str, userinfo: str, host: str, rest: str) -> None:
    """`https://[evil]/` made urlsplit raise ValueError, which reached users as exit 3 from import, pin and
    resolve (their URL checks scrub first)."""
    url = f"{scheme}://{userinfo}{host}/{rest}"
    scrubbed = scrub_url(url)
    assert SECRET not in scrubbed
    if userinfo:
        assert carries_credential(url)


def test_user_info_without_slashes_and_file_paths_named_t(tmp_path: Path) -> None:
    """`https:alice:PW@host/` has no host for Python's urlsplit but user info for rattler and uv (WHATWG): a
    channel so written was printed by render (found by a review). A `file:` path with a folder named `t` is no
    token."""
    assert carries_credential(f"https:alice:{SECRET}@conda.example.org/private") and SECRET not in scrub_url(
        f"https:alice:{SECRET}@conda.example.org/private"
    )
    assert (
        not carries_credential("file:///data/t/chan/linux-64/a-1-0.conda")
        and scrub_url("file:///data/t/chan/x") == "file:///data/t/chan/x"
    )
    original = QUICKSTART.read_text()
    assert "  channels: []\n" in original
    lock = tmp_path / "channel.conda-lock.yml"
    lock.write_text(
        original.replace(
            "  channels: []\n",
            f"  channels:\n  - url: https:alice:{SECRET}@conda.example.org/private\n    used_env_vars: []\n",
            1,
        )
    )
    result = run_cli("render", str(lock), "-f", "environment")
    assert (
        result.returncode == 1 and "carries a credential" in result.stderr and not _leaks(result.stdout, result.stderr)
    ), result.stderr
    # a channel URL that does not parse is no URL, not one "carrying a credential" (a review found the wording)
    lock.write_text(
        original.replace(
            "  channels: []\n", "  channels:\n  - url: https://[conda.example.org]/private\n    used_env_vars: []\n", 1
        )
    )
    result = run_cli("render", str(lock), "-f", "environment")
    assert result.returncode == 1 and "is not a URL" in result.stderr and "credential" not in result.stderr, (
        result.stderr
    )


def test_an_image_reference_carrying_credentials_is_refused_without_echoing_it(tmp_path: Path) -> None:
    """push, check --image, export --from-image, attest and certs printed `docker://alice:PASSWORD@host/…` in their
    progress and error lines (found by an attack battery); the reference is refused before any use, unrepeated."""
    reference = f"docker://alice:{SECRET}@127.0.0.1:9/team/img:v1"
    layout = tmp_path / "img"
    layout.mkdir()
    commands = [
        ("push", str(layout), reference, "--insecure"),
        ("check", "--image", reference, "--insecure"),
        ("check", "--image", reference, "--lock", str(QUICKSTART), "--insecure"),
        ("export", str(QUICKSTART), "--out", str(tmp_path / "out"), "--from-image", reference, "--insecure"),
        ("attest", reference, str(QUICKSTART), "--key", str(QUICKSTART), "--insecure"),
        ("certs", reference, "--insecure"),
    ]
    slashed = f"docker:///alice:{SECRET}@127.0.0.1:9/team/img:v1"  # a review's bypass: the host after a third slash
    commands += [
        ("check", "--image", slashed, "--insecure"),
        (
            "fleet",
            "slurm",
            "--arch",
            "cpu",
            "--nodes",
            "2",
            "--certs",
            str(tmp_path / "certs"),
            "--out",
            str(tmp_path / "slurm"),
            "--image",
            reference,
        ),
    ]
    for command in commands:
        result = run_cli(*command, env={"LOCKGEN_HOME": str(tmp_path / "home")})
        assert (
            result.returncode == 1
            and "carries credentials" in result.stderr
            and "hint: log in with `skopeo login HOST`" in result.stderr
        ), (command, result.stderr)
        assert not _leaks(result.stdout, result.stderr) and "Traceback" not in result.stderr, (command, result.stderr)
    assert not (tmp_path / "out").exists() and not (tmp_path / "slurm").exists()
    archive = run_cli(
        "export", str(QUICKSTART), "--out", str(tmp_path / "a.tar"), "--format", "docker-archive", "--base", reference
    )
    assert archive.returncode == 1 and not _leaks(archive.stdout, archive.stderr), archive.stderr
    stack = tmp_path / "team" / "stack.toml"
    stack.parent.mkdir()
    stack.write_text(f'[stack]\nname = "team"\nextends = "{reference}"\n[dependencies]\nnumpy = "*"\n')
    team = run_cli("resolve", str(stack), env={"LOCKGEN_HOME": str(tmp_path / "home")})
    assert (
        team.returncode == 1 and "`extends` carries credentials" in team.stderr and not _leaks(team.stdout, team.stderr)
    ), team.stderr


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["rev", "subdirectory", "tag", "a b", "x%2Fy", "tok"]),
            st.text(alphabet="ab/%2F+~: )(", max_size=8),
        ),
        max_size=4,
    )
)
def test_a_query_holding_no_secret_is_kept_as_written(pairs: list[tuple[str, str]]) -> None:
    """Only a secret pair is taken out of a URL's query; the rest is not decoded and encoded again (`%2F`, `+`,
    `~`, and `):` stayed as written only by luck of urlencode's safe set)."""
    query = "&".join(f"{key}={value}" for key, value in pairs)
    url = f"https://github.com/org/repo.git?{query}#0123abcd"
    assert scrub_url(url) == (url if query else "https://github.com/org/repo.git#0123abcd")
    assert scrub_url(f"https://host/x?token={SECRET}&{query}") == f"https://host/x?{query}".rstrip("?")


_URL_PARTS = st.sampled_from(
    [
        "a",
        "Z",
        "0",
        ".",
        "-",
        "/",
        "/t/",
        "t",
        "@",
        ":",
        "%2F",
        "?",
        "#",
        "=",
        "&",
        ";",
        "~",
        "+",
        "!",
        "'",
        "(",
        " ",
        "\t",
        "[",
        "]",
        "é",
    ]
)


@settings(max_examples=500, deadline=None)
@example("https://files.example/pkg-1.0-py3-none-any.whl")
@example("https://alice@files.example/pkg.whl")
@example("https://files.example/simple/t/secret/pkg.whl")
@example("https://files.example:8443/pkg.whl")
@example("https://files.example/pkg.whl?token=x")
@example("https://files.example/pkg.whl#sha256=00")
@example("https://files.example")
@example("HTTPS://files.example/a%2Fb.whl")
@given(
    st.builds(
        str.__add__,
        st.sampled_from(["https://", "http://", "HTTPS://", "file://", "https:", ""]),
        st.lists(_URL_PARTS, max_size=12).map("".join),
    )
)
def test_a_plain_index_url_is_read_as_urlsplit_reads_it(url: str) -> None:
    """The fast path for plain index URLs (`split_url`, and `scrub_url`/`carries_credential` passing them as they
    are) gives what the full parse gives, on URLs built of the characters that matter to either."""
    from lockgen.core import credentials

    try:
        expected = urlsplit(url)
    except ValueError:
        expected = None
    if expected is not None:
        assert credentials.split_url(url) == expected
    fast = (credentials.scrub_url(url), credentials.carries_credential(url))
    with patch.object(credentials, "plain_index_url", lambda _: False):
        assert fast == (credentials.scrub_url(url), credentials.carries_credential(url))


_WHEEL_TAILS = st.sampled_from(
    ["pkg-1.0-py3-none-any.whl", "pkg-2.0-py3-none-any.whl", "other-1.0-py3-none-any.whl", "pkg-1.0.tar.gz", "", "x"]
)


@settings(max_examples=500, deadline=None)
@example("https://files.example/", "pkg-1.0-py3-none-any.whl")
@example("https://alice@files.example/", "pkg-1.0-py3-none-any.whl")
@example("https://files.example/t/secret/", "pkg-1.0-py3-none-any.whl")
@example("https://files.example:8443/", "pkg-1.0-py3-none-any.whl")
@example("https://files.example:x/", "pkg-1.0-py3-none-any.whl")
@example("https://files.example/", "pkg-1.0-py3-none-any.whl?token=x")
@example("https://files.example/", "pkg-2.0-py3-none-any.whl")
@example("https://files.example/a%2F", "pkg-1.0-py3-none-any.whl")
@given(
    st.builds(
        str.__add__,
        st.sampled_from(["https://", "http://", "HTTPS://", "file://", "https:", "", "local:", "unpublished:"]),
        st.lists(_URL_PARTS, max_size=10).map("".join),
    ),
    st.builds(str.__add__, _WHEEL_TAILS, st.lists(_URL_PARTS, max_size=3).map("".join)),
)
def test_a_lock_entry_with_a_plain_index_url_is_judged_as_any_url_is(url: str, tail: str) -> None:
    """The lock check's fast path for a plain index URL (only its file name judged: `lock_fields._url`) gives the
    verdict the full parse gives (the scheme, host, port, credential, query and fragment rules), accepting or
    refusing with the same words."""
    from lockgen.core.lock import lock_fields
    from lockgen.errors import UserError
    from lockgen.model.lock import pip_wheel

    entry = pip_wheel("pkg", "1.0", "linux-64", url + tail, "0" * 64)

    def verdict() -> str:
        try:
            lock_fields.check_package(entry, "test.lock")
        except UserError as refused:
            return f"refused: {refused}"
        return "accepted"

    fast = verdict()
    with patch.object(lock_fields, "plain_index_url", lambda _: False):
        assert fast == verdict()
