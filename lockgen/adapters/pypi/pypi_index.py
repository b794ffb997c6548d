"""The PyPI simple API (PEP 691 JSON): the wheel file an installed distribution came from, and its pin.

Given an index (default `https://pypi.org/simple`), a name, a version and the installed `WHEEL` tags,
it reads `/<normalised-name>/` with `Accept: application/vnd.pypi.simple.v1+json` and returns the one wheel
whose name, version and tag set cover the installed ones, with the index's sha256 of the file (the pin),
its size and URL (made absolute against the page). Finding a wheel to pin needs its size, so `find_wheel` refuses
an index that answers only HTML; listing a project (`project_wheels(..., html=True)`) also reads PEP 503 HTML
pages, since PyTorch's own indexes (download.pytorch.org/whl/<variant>) serve nothing else: each anchor's file
name, `#sha256=` fragment (optional, as PEP 503 has it), `data-yanked`, PEP 658/714 metadata attributes and
`data-upload-time` where given.

An index may be a local folder (`file:///mirror/whl/cu126`, an air-gapped mirror): its project page is
`<folder>/<name>/index.html` (PEP 503, the layout uv reads from a `file://` index) or, where a mirror writes PEP 691
JSON beside it, `index.v1_json` (bandersnatch's name). Such a folder is read only under `$LOCKGEN_FILE_ROOTS`
(`file_roots`), as a lock's `file:` URLs are, and so are the wheels its page links.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import unquote, urljoin, urlsplit

from lockgen.core import nesting
from lockgen.core.credentials import scrub_url
from lockgen.adapters import user_files
from lockgen.adapters.store import file_roots
from lockgen.adapters.http_fetch import Meter, get
from lockgen.model.names import shown
from lockgen.core.pypi.wheel_names import choose, parse_wheel_filename
from lockgen.model.names import normalize
from lockgen.errors import LockgenError, NotFoundError, UserError

PYPI = "https://pypi.org/simple"
JSON_TYPE = "application/vnd.pypi.simple.v1+json"
PAGE_LIMIT = 64 << 20  # torch's page lists thousands of files
_SHA256 = re.compile(r"[0-9a-fA-F]{64}")


@dataclass(frozen=True)
class IndexedWheel:
    """A wheel file as the index lists it."""

    filename: str
    url: str
    sha256: str  # "" where a PEP 503 page gives none (such a listing names releases; it pins nothing)
    size: int | None
    yanked: bool
    uploaded: str | None = None  # PEP 700 `upload-time`, when the index gives it
    metadata: bool = False  # PEP 658/714: the core metadata is served at `url + ".metadata"`


def _files(page: bytes, page_url: str) -> dict[str, IndexedWheel]:
    try:
        document = nesting.loads(page)
        entries = document["files"]
        wheels = {}
        for entry in entries:
            filename = entry["filename"]
            sha256 = entry.get("hashes", {}).get("sha256")
            if filename.endswith(".whl") and sha256 is not None:
                sha256 = _checked_sha256(sha256, filename, page_url)
                size, uploaded = entry.get("size"), entry.get("upload-time")
                metadata = entry.get("core-metadata", entry.get("data-dist-info-metadata"))
                wheels[filename] = IndexedWheel(
                    filename,
                    urljoin(page_url, entry["url"]),
                    sha256.lower(),
                    size if isinstance(size, int) else None,
                    bool(entry.get("yanked")),
                    uploaded if isinstance(uploaded, str) else None,
                    bool(metadata),
                )
        return wheels
    except (ValueError, KeyError, TypeError, AttributeError):
        raise UserError(
            f"{scrub_url(page_url)} is not a PEP 691 project page",
            "the index answered JSON without a `files` list of filename/url/hashes",
        ) from None


def _checked_sha256(value: object, filename: str, page_url: str) -> str:
    """`value`, the sha256 the index page at `page_url` lists for `filename`, refused unless 64 hex digits."""
    if isinstance(value, str) and _SHA256.fullmatch(value):
        return value
    raise UserError(
        f"{scrub_url(page_url)} lists {shown(str(value), 80)} as the sha256 of {shown(filename, 120)}, "
        "not 64 hex digits",
        "the index serves a broken page: tell its maintainers, or use another index",
    )


class _Anchors(HTMLParser):
    """The wheel anchors of a PEP 503 page, with their attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.anchors: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.anchors.append(dict(attrs))


def _html_files(page: bytes, page_url: str) -> dict[str, IndexedWheel]:
    parser = _Anchors()
    parser.feed(page.decode("utf-8", errors="replace"))
    wheels = {}
    for anchor in parser.anchors:
        href = anchor.get("href") or ""
        url, _, fragment = urljoin(page_url, href).partition("#")
        filename = unquote(urlsplit(url).path).rsplit("/", 1)[-1]
        sha256 = fragment.removeprefix("sha256=") if fragment.startswith("sha256=") else ""
        if filename.endswith(".whl"):  # PEP 503: the hash is optional
            sha256 = _checked_sha256(sha256, filename, page_url) if sha256 else ""
            metadata = anchor.get("data-core-metadata", anchor.get("data-dist-info-metadata"))
            wheels[filename] = IndexedWheel(
                filename,
                url,
                sha256.lower(),
                None,
                "data-yanked" in anchor,
                anchor.get("data-upload-time"),
                bool(metadata) and metadata != "false",
            )
    return wheels


def project_wheels(
    name: str, index: str = PYPI, timeout_s: float = 30.0, meter: Meter | None = None, html: bool = False
) -> dict[str, IndexedWheel]:
    """Every wheel file the index lists for project `name`, by file name (from a PEP 503 HTML page too, with
    `html`: such pages give no sizes)."""
    page_url = f"{index.rstrip('/')}/{normalize(name)}/"
    if urlsplit(page_url).scheme == "file":
        return _local_files(page_url, html)
    accept = f"{JSON_TYPE}, text/html;q=0.1" if html else JSON_TYPE
    reply = get(page_url, {"Accept": accept}, meter or Meter(), timeout_s, PAGE_LIMIT)
    kind = reply.headers.get("content-type", "")
    if html and kind.startswith("text/html"):
        return _html_files(reply.body, page_url)
    if not kind.startswith(JSON_TYPE):
        raise UserError(
            f"{scrub_url(page_url)} did not answer in PEP 691 JSON",
            "use an index that serves application/vnd.pypi.simple.v1+json (PyPI, devpi, a uv/pip mirror)",
        )
    return _files(reply.body, page_url)


def _local_files(page_url: str, html: bool) -> dict[str, IndexedWheel]:
    """A local index folder's project page (JSON first, then HTML with `html`), and only wheels under the roots."""
    folder = file_roots.local_path(page_url, f"the index page {scrub_url(page_url)}")
    names = ("index.v1_json", "index.html") if html else ("index.v1_json",)
    page = next((folder / n for n in names if (folder / n).is_file()), None)
    if page is None:
        raise NotFoundError(
            f"{scrub_url(page_url)} has no {' or '.join(names)}",
            "check the index folder: a PEP 503 index has <project>/index.html",
        )
    try:
        body = user_files.read_bytes(page, PAGE_LIMIT, "index page")
    except OSError as exc:
        raise UserError(f"cannot read {shown(str(page))}: {exc.strerror or exc}", "check the index folder") from None
    wheels = _files(body, page.as_uri()) if page.name.endswith("json") else _html_files(body, page.as_uri())
    for wheel in wheels.values():
        if urlsplit(wheel.url).scheme != "file":
            raise UserError(
                f"the local index page {shown(str(page))} links {scrub_url(wheel.url)}, outside the folder",
                "a local mirror's pages link its own files (file: URLs under $LOCKGEN_FILE_ROOTS)",
            )
        file_roots.local_path(wheel.url, f"the index page {shown(str(page))}")
    return wheels


def listed_hashes(name: str, index: str, timeout_s: float = 30.0) -> dict[str, IndexedWheel]:
    """Each wheel file the index's page for project `name` (PEP 691 JSON, else PEP 503 HTML) lists with a sha256,
    by its exact file name, with the URL it lists it at (a hash pins a file only where that is the lock's URL). A
    page that cannot be read (the index unreachable, no index page, a broken sha256) is a `LookupError` saying why."""
    try:
        wheels = project_wheels(name, index, timeout_s, html=True)
    except LockgenError as exc:
        raise LookupError(f"its index could not be read ({exc.message})") from None
    return {filename: wheel for filename, wheel in wheels.items() if wheel.sha256}


def find_wheel(
    name: str,
    version: str,
    tags: tuple[str, ...],
    index: str = PYPI,
    build: str | None = None,
    timeout_s: float = 30.0,
    meter: Meter | None = None,
) -> IndexedWheel:
    """The index's wheel of `name==version` whose tags cover `tags` (and the build tag, when given)."""
    wheels = project_wheels(name, index, timeout_s, meter)
    names = []
    for filename in sorted(wheels):
        try:
            names.append(parse_wheel_filename(filename))
        except UserError:
            continue  # an odd file name on the index is not this distribution's wheel
    return wheels[choose(names, name, version, tags, build).filename]
