"""Installers: conda archives linked with py-rattler (`rattler.install`, placeholders rewritten for the
final prefix), pip entries installed with uv into the prefix's interpreter (hash-checked, no deps,
wheels only), relocatable venvs for pure-PyPI locks, and the Python outside it that a venv runs on."""

from __future__ import annotations

import errno
import os
import posixpath
import re
import stat
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from lockgen.adapters.store import file_roots, transfer_progress
from lockgen.adapters.tool_runner import last_line, run_tool
from lockgen.adapters.pypi.uv_resolver import uv_binary
from lockgen.core.credentials import scrub_url
from lockgen.errors import HostError, LockFormatError, ToolFailedError
from lockgen.model.names import shown
from lockgen.model.lock import LockedPackage


def install_conda(
    archives: list[Path], prefix: Path, final_prefix: Path, platform: str, cache: Path, installed: Sequence[Path] = ()
) -> None:
    """Links verified archives into `prefix`, with `final_prefix` patched into every placeholder.
    `installed`: conda-meta records already in `prefix` whose packages stay as they are (a base
    environment the prefix is built on; its files need not be there)."""
    import asyncio  # the conda side's: a pure-PyPI build loads none of it (30 ms)

    import rattler

    async def run() -> None:
        present = [rattler.PrefixRecord.from_path(path) for path in installed]
        records = [await rattler.RepoDataRecord.from_package_archive(str(path)) for path in archives]
        await rattler.install(
            [*present, *records],
            target_prefix=str(prefix),
            cache_dir=cache,
            installed_packages=present,
            platform=rattler.Subdir(platform),
            execute_link_scripts=False,
            show_progress=False,
            alternative_target_prefix=str(final_prefix),
        )

    try:
        asyncio.run(run())
    except Exception as exc:  # rattler's own error types: a bad archive, a path outside the prefix, a clobber
        if "(os error 28)" in str(exc) or "(os error 122)" in str(exc):  # ENOSPC, EDQUOT: the machine's, said as such
            raise OSError(errno.ENOSPC, "No space left on device", f"{prefix} or the package cache {cache}") from None
        raise LockFormatError(
            f"installing into {prefix} failed: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}",
            "an archive was refused (bad content or paths outside the prefix); nothing was kept",
        ) from None


def make_venv(prefix: Path, python: str, meanwhile: Callable[[], object] | None = None) -> None:
    """A relocatable venv of Python `python` at `prefix` (uv venv); `meanwhile`: work done while uv runs
    (`run_tool`)."""
    run_tool(
        [uv_binary(), "venv", "--relocatable", "--python", python, "--no-project", str(prefix)],
        f"making a Python {python} environment",
        f"install Python {python} on this host (uv python install {python})",
        meanwhile=meanwhile,
    )


def point_venv_at(prefix: Path, interpreter: str) -> None:
    """Makes a venv use `interpreter` (an absolute path where the image's base has Python) in place of
    the build host's, whose path (a pyenv or uv folder) must not leak into an image. `bin/python` is
    the one link to the interpreter (uv makes python3 and pythonX.Y links to it)."""
    link = prefix / "bin" / "python"
    link.unlink()
    link.symlink_to(interpreter)
    config = prefix / "pyvenv.cfg"
    lines = [
        f"home = {Path(interpreter).parent}" if line.startswith("home =") else line
        for line in config.read_text().splitlines()
    ]
    config.write_text("\n".join(lines) + "\n")


def outside_interpreter(prefix: Path, image_prefix: str, source: str | None = None) -> tuple[str, str | None] | None:
    """The Python a venv at `prefix` runs on, outside the environment: (the absolute path `bin/python`'s links
    lead to once they leave it, its `pyvenv.cfg` `home` or None); None when `bin/python` is no link out of it (a
    conda python, a file of its own, or none). The environment is at `image_prefix` in the image (and at
    `source` where it was made): a link into either stays in it."""
    current = "bin/python"
    for _ in range(17):  # bounded, as a kernel gives up on a loop of links
        link = prefix / current
        if not link.is_symlink():
            return None
        target = os.readlink(link)
        absolute = posixpath.normpath(
            target if target.startswith("/") else posixpath.join(image_prefix, posixpath.dirname(current), target)
        )
        owner = next(
            (
                root
                for root in (image_prefix, source)
                if root and (absolute == root or absolute.startswith(root.rstrip("/") + "/"))
            ),
            None,
        )
        if owner is None:
            return absolute, _venv_home(prefix)
        current = posixpath.relpath(absolute, owner)
    return None


def _venv_home(prefix: Path) -> str | None:
    """`home` of the venv's `pyvenv.cfg` (the folder of the Python it was made with), or None."""
    try:
        lines = (prefix / "pyvenv.cfg").read_text(errors="replace").splitlines()
    except OSError:
        return None
    return next(
        (value.strip() for key, _, value in (line.partition("=") for line in lines) if key.strip() == "home"), None
    )


INSTALL_HINT = "check the network or the index"
_HASH_MISMATCH = re.compile(
    r"Hash mismatch for `(?P<dist>[^`]+)`"
    r".*?Expected:\s*(?:sha256:)?(?P<expected>[0-9a-f]{64})"
    r".*?Computed:\s*(?:sha256:)?(?P<computed>[0-9a-f]{64})",
    re.DOTALL,
)
_STYLE = re.compile(r"\x1b\[[0-9;]*m")  # uv colours its report where it decides a terminal may read it


def _hash_mismatch(stderr: str) -> LockFormatError | None:
    """uv's refusal of a wheel whose bytes are not the lock's sha256, said as what it is: the lock and the file
    differ (a lock edited by hand, or an index that serves another file under the name), not the network."""
    found = _HASH_MISMATCH.search(_STYLE.sub("", stderr))
    if found is None:
        return None
    name, _, url = " ".join(found["dist"].split()).partition(" @ ")  # `NAME @ URL` (uv wraps a long one); `NAME==V` too
    where = f" at {shown(scrub_url(url), 200)}" if url else ""
    return LockFormatError(
        f"`{shown(name, 80)}`'s wheel{where} has sha256 {found['computed']}, and the lock says "
        f"{found['expected']}: nothing was installed",
        "the lock's hash or the index's file changed since the lock was made: restore the lock lockgen wrote, or "
        "re-lock (lockgen resolve) from the index you trust",
    )


def install_pip(
    packages: list[LockedPackage],
    python: Path,
    progress: Callable[[str], None],
    env: Mapping[str, str] | None = None,
    meanwhile: Callable[[], object] | None = None,
    offline: bool = False,
) -> None:
    """Installs exactly the locked wheels: `--require-hashes --no-deps --only-binary :all:` (uv fetches
    them; a line every few seconds says the install is still going); `env`: uv's environment (its cache
    and link mode); `meanwhile`: work done while uv runs (`run_tool`); `offline`: from uv's cache alone
    (`--offline`: no request, not even to revalidate a cached wheel; one not cached fails the run)."""
    for package in packages:  # uv reads a file: URL itself: only under the user's roots
        if package.url.startswith("file:"):
            file_roots.local_path(package.url, f"{package.name} {package.version}")
    lines = [f"{p.name} @ {p.url} --hash=sha256:{p.hash.sha256}" for p in packages]
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as requirements:
        requirements.write("\n".join(lines) + "\n")
    progress(f"installing {len(packages)} wheels with uv (hash-checked, no dependencies)")
    cache = (env or os.environ).get("UV_CACHE_DIR")
    growth = CacheGrowth(Path(cache)) if cache else None
    try:
        done = run_tool(
            [
                uv_binary(),
                "pip",
                "install",
                "--python",
                str(python),
                "--no-deps",
                "--require-hashes",
                "--only-binary",
                ":all:",
                "--no-config",
                *(["--offline"] if offline else []),
                "-r",
                requirements.name,
            ],
            "installing the pip entries",
            INSTALL_HINT,
            timeout_s=3600,
            env=env,
            heartbeat=lambda seconds: progress(
                f"installing the wheels with uv: {seconds:.0f} s" + (growth.said() if growth else "")
            ),
            heartbeat_s=transfer_progress.heartbeat_s(),
            meanwhile=meanwhile,
            check=False,
        )
        if done.returncode != 0:
            raise _hash_mismatch(done.stderr) or ToolFailedError(
                "installing the pip entries", "uv", done.returncode, last_line(done.stderr or done.stdout), INSTALL_HINT
            )
    finally:
        Path(requirements.name).unlink(missing_ok=True)


class CacheGrowth:
    """What uv has written into its cache since this was made, for a progress line: the wheels it unpacks as it
    downloads them (uv streams a wheel into a `.tmp*` folder at the cache's root, then renames it into
    `archive-v*/`). Unpacked bytes, not the compressed bytes on the wire, and said as such; cheap: only the
    folders that are new are walked, and a finished archive (never changed after its rename) once. The `.tmp*`
    folders there at the start (a killed run's leftovers, another uv run's) are not counted; one that another uv
    run starts meanwhile cannot be told from this one's."""

    def __init__(self, cache: Path) -> None:
        self._cache = cache
        self._before = set(self._archives())
        self._unpacking_before = set(_folders(cache, ".tmp"))
        self._finished: dict[Path, int] = {}
        self._last = (time.monotonic(), 0)

    def _archives(self) -> list[Path]:
        return [entry for folder in _folders(self._cache, "archive-v") for entry in _entries(folder)]

    def written(self) -> int:
        """Bytes in the archives made since the start, and in the ones being unpacked now."""
        for archive in self._archives():
            if archive not in self._before and archive not in self._finished:
                self._finished[archive] = _bytes_under(archive)
        unpacking = [f for f in _folders(self._cache, ".tmp") if f not in self._unpacking_before]
        return sum(self._finished.values()) + sum(_bytes_under(f) for f in unpacking)

    def said(self) -> str:
        """`, 12.3 MB unpacked into uv's cache (2.1 MB/s)`: the rate since the last time asked; empty while
        nothing was written (every wheel already in the cache)."""
        now, written = time.monotonic(), self.written()
        then, before = self._last
        self._last = (now, written)
        if not written:
            return ""
        rate = (written - before) / max(now - then, 1e-3)
        return f", {transfer_progress.amount(written)} unpacked into uv's cache ({transfer_progress.amount(rate)}/s)"


def _entries(folder: Path) -> list[Path]:
    try:
        return [Path(entry.path) for entry in os.scandir(folder)]
    except OSError:  # gone, or not a folder
        return []


def _folders(cache: Path, prefix: str) -> list[Path]:
    return [entry for entry in _entries(cache) if entry.name.startswith(prefix) and entry.is_dir()]


def _bytes_under(folder: Path) -> int:
    """The sizes of the regular files under `folder`, links not followed; a file or folder that goes meanwhile (uv
    renames what it finished) is left out."""
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                info = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            total += info.st_size if stat.S_ISREG(info.st_mode) else 0
    return total


VERSION_OF = "import platform; print(platform.python_version())"


def interpreter_version(python: str) -> str:
    """The `X.Y.Z` of the Python at `python`, as it says when run (a venv's `pyvenv.cfg` says what it was made with)."""
    return run_tool(
        [python, "-I", "-c", VERSION_OF],
        f"asking {python} for its version",
        "pass a Python that runs here",
        timeout_s=60,
    ).stdout.strip()


def pinned_python(version: str, progress: Callable[[str], None]) -> str:
    """The path of Python `version` (`X.Y.Z`, a lock's exact interpreter) on this host, as uv finds it (its managed
    Pythons and the search path, outside any virtual environment), else as `uv python install` provides it (uv
    downloads it, where its settings allow). Without it, a HostError naming the `X.Y.Z` this host has instead."""
    found = _found_python(version)
    if found is not None:
        return found
    progress(f"this host has no Python {version}: installing it with uv")
    installed = run_tool(
        [uv_binary(), "python", "install", version], f"installing Python {version}", timeout_s=600, check=False
    )
    found = _found_python(version) if installed.returncode == 0 else None
    if found is not None:
        return found
    minor = ".".join(version.split(".")[:2])
    other = _found_python(minor)
    here = (
        f"this host's Python {minor} is {interpreter_version(other)} ({other})"
        if other
        else f"this host has no Python {minor}"
    )
    why = next(
        (line.strip() for line in reversed(installed.stderr.splitlines()) if line.strip()),
        f"uv exit {installed.returncode}",
    )
    raise HostError(
        f"the lock was made for Python {version}, and {here}; uv could not install {version}: {why}",
        f"install Python {version} (uv python install {version}, where uv may download it) and run this again, "
        f'or re-lock for the Python here: python = "{minor}" under [stack] takes any {minor}.x',
    )


def _found_python(request: str) -> str | None:
    """The interpreter `uv python find` picks for `request` (`3.11.9`, `3.11`), never downloading, or None."""
    found = run_tool(
        [uv_binary(), "python", "find", "--system", "--no-project", "--no-python-downloads", request],
        f"finding Python {request}",
        timeout_s=60,
        check=False,
    )
    return found.stdout.strip() or None if found.returncode == 0 else None
