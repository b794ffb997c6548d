"""The PyPI simple API (PEP 691 JSON): the wheel file an installed distribution came from, and its pin.

Given an index (default `https://pypi.org/simple`), a name, a version and the installed `WHEEL` tags,
it reads `/<normalised-name>/` with `Accept: application/vnd.pypi.simple.v1+json` and returns the one wheel
whose name, version and tag set cover the installed ones, with the index's sha256 of the file (the pin),
its size and URL (made absolute against the page). An index that answers only HTML is refused: PEP 503
HTML pages carry no size and are a second format to keep.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from urllib.parse import urljoin

from lockgen.core.credentials import scrub_url
from lockgen.adapters.http_fetch import Meter, get
from lockgen.core.wheel_names import choose, parse_wheel_filename
from lockgen.model.names import normalize
from lockgen.errors import UserError

PYPI = "https://pypi.org/simple"
JSON_TYPE = "application/vnd.pypi.simple.v1+json"
PAGE_LIMIT = 64 << 20  # torch's page lists thousands of files


@dataclass(frozen=True)
class IndexedWheel:
    """A wheel file as the index lists it."""

    filename: str
    url: str
    sha256: str
    size: int | None
    yanked: bool
    uploaded: str | None = None  # PEP 700 `upload-time`, when the index gives it
    metadata: bool = False  # PEP 658/714: the core metadata is served at `url + ".metadata"`


def _files(page: bytes, page_url: str) -> dict[str, IndexedWheel]:
    try:
        document = json.loads(page)
        entries = document["files"]
        wheels = {}
        for entry in entries:
            filename = entry["filename"]
            sha256 = entry.get("hashes", {}).get("sha256")
            if filename.endswith(".whl") and isinstance(sha256, str) and len(sha256) == 64:
                size, uploaded = entry.get("size"), entry.get("upload-time")
                metadata = entry.get("core-metadata", entry.get("data-dist-info-metadata"))
                wheels[filename] = IndexedWheel(filename, urljoin(page_url, entry["url"]), sha256.lower(),
                                                size if isinstance(size, int) else None, bool(entry.get("yanked")),
                                                uploaded if isinstance(uploaded, str) else None, bool(metadata))
        return wheels
    except (ValueError, KeyError, TypeError, AttributeError):
        raise UserError(f"{scrub_url(page_url)} is not a PEP 691 project page",
                        "the index answered JSON without a `files` list of filename/url/hashes") from None


def project_wheels(name: str, index: str = PYPI, timeout_s: float = 30.0, meter: Meter | None = None) -> dict[str, IndexedWheel]:
    """Every wheel file the index lists for project `name`, by file name."""
    page_url = f"{index.rstrip('/')}/{normalize(name)}/"
    reply = get(page_url, {"Accept": JSON_TYPE}, meter or Meter(), timeout_s, PAGE_LIMIT)
    if not reply.headers.get("content-type", "").startswith(JSON_TYPE):
        raise UserError(f"{scrub_url(page_url)} did not answer in PEP 691 JSON",
                        "use an index that serves application/vnd.pypi.simple.v1+json (PyPI, devpi, a uv/pip mirror)")
    return _files(reply.body, page_url)


def find_wheel(name: str, version: str, tags: tuple[str, ...], index: str = PYPI, build: str | None = None,
               timeout_s: float = 30.0, meter: Meter | None = None) -> IndexedWheel:
    """The index's wheel of `name==version` whose tags cover `tags` (and the build tag, when given)."""
    wheels = project_wheels(name, index, timeout_s, meter)
    names = []
    for filename in sorted(wheels):
        try:
            names.append(parse_wheel_filename(filename))
        except UserError:
            continue  # an odd file name on the index is not this distribution's wheel
    return wheels[choose(names, name, version, tags, build).filename]
