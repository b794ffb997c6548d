"""A PEP 503 simple index of real wheels the tests build (zip files with METADATA, WHEEL and RECORD),
for offline PyPI cases: hashes, environment markers, platform tags, yanked releases."""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import html
import http.server
import threading
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Wheel:
    name: str
    version: str
    tag: str = "py3-none-any"
    requires: tuple[str, ...] = ()
    yanked: bool = False
    files: dict[str, str] = field(default_factory=dict)

    @property
    def filename(self) -> str:
        return f"{self.name.replace('-', '_')}-{self.version}-{self.tag}.whl"


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def build_wheel(wheel: Wheel, folder: Path) -> Path:
    module = wheel.name.replace("-", "_")
    dist_info = f"{module}-{wheel.version}.dist-info"
    metadata = (
        "\n".join(
            ["Metadata-Version: 2.1", f"Name: {wheel.name}", f"Version: {wheel.version}"]
            + [f"Requires-Dist: {r}" for r in wheel.requires]
        )
        + "\n"
    )
    entries = {
        f"{module}/__init__.py": f"VERSION = {wheel.version!r}\n",
        **wheel.files,
        f"{dist_info}/METADATA": metadata,
        f"{dist_info}/WHEEL": (
            f"Wheel-Version: 1.0\nGenerator: lockgen-tests\nRoot-Is-Purelib: true\nTag: {wheel.tag}\n"
        ),
    }
    record = [_record_line(p, d.encode()) for p, d in entries.items()] + [f"{dist_info}/RECORD,,"]
    entries[f"{dist_info}/RECORD"] = "\n".join(record) + "\n"
    path = folder / wheel.filename
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in sorted(entries.items()):
            archive.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), text)
    return path


def build_index(root: Path, wheels: list[Wheel], beside: bool = False) -> Path:
    """`root/simple/<project>/index.html` pages linking `root/files/<wheel>#sha256=...` (yanked marked); with
    `beside`, linking `root/simple/<wheel>`, the wheels beside the project pages as PyTorch's indexes serve them."""
    files = root / "simple" if beside else root / "files"
    files.mkdir(parents=True, exist_ok=True)
    projects: dict[str, list[str]] = {}
    for wheel in wheels:
        path = build_wheel(wheel, files)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        yanked = ' data-yanked="broken"' if wheel.yanked else ""
        projects.setdefault(wheel.name, []).append(
            f'<a href="{"../" if beside else "../../files/"}{path.name}#sha256={digest}"{yanked}>'
            f"{html.escape(path.name)}</a>"
        )
    for project, links in projects.items():
        page = root / "simple" / project
        page.mkdir(parents=True, exist_ok=True)
        (page / "index.html").write_text("<!DOCTYPE html><html><body>\n" + "<br>\n".join(links) + "\n</body></html>\n")
    index = "".join(f'<a href="{p}/">{p}</a><br>\n' for p in sorted(projects))
    (root / "simple" / "index.html").write_text(f"<!DOCTYPE html><html><body>\n{index}</body></html>\n")
    return root


@contextlib.contextmanager
def served_index(root: Path, wheels: list[Wheel], beside: bool = False) -> Iterator[str]:
    """The index of `wheels` built under `root` (`build_index`) and served over HTTP on loopback while the block
    runs: its URL."""
    from tests.conftest import _QuietHandler

    build_index(root, wheels, beside)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    finally:
        server.shutdown()
