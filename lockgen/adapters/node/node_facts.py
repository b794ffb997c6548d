"""This node's facts for `lockgen detect`: the one place lockgen reads the local hardware to choose a target
(resolving never does). Its GPUs and driver from `nvidia-smi` (`gpu_host.probe`), its glibc from
`confstr(CS_GNU_LIBC_VERSION)`, its conda platform from `uname -m`. For tests and dry runs a JSON file states
them instead (`detect --node FILE`, or `$LOCKGEN_NODE_FACTS` for every command), in the shape
`detect --json` prints under `node`.

`node_key` names what detection reads (the facts file's path and bytes, or the probe's raw answers) without
pydantic or the models, so a target detected once can be kept by it (`run` without `--target`, issue 43): the
probe runs again whenever a kept detection is to be used, and only the validation and the matching are skipped.
The probe asks `nvidia-smi` once (its GPUs and driver; never the topology, which detection does not read)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from lockgen.adapters import home, user_files
from lockgen.adapters.node import gpu_host
from lockgen.core import nesting
from lockgen.model.names import shown
from lockgen.errors import UserError

if TYPE_CHECKING:  # pydantic: imported where facts are validated, never by `node_key`
    from lockgen.model.node import NodeFacts

NODE_FACTS_ENV = "LOCKGEN_NODE_FACTS"
_MAX_BYTES = 1 << 20


def node_facts(stated: Path | None = None) -> NodeFacts:
    """The facts in `stated`, else in the file `$LOCKGEN_NODE_FACTS` names, else this node's, probed."""
    return keyed_node_facts(stated)[0]


def keyed_node_facts(stated: Path | None = None) -> tuple[NodeFacts, str]:
    """`node_facts`, and the `node_key` of exactly the inputs they were made from (read once)."""
    named = _named(stated)
    if named is not None:
        data = _stated_bytes(named)
        return _parsed(named, data), _key("stated", str(named.absolute()), data.hex())
    raw = _probed()
    return _facts_of(raw), _key("probed", json.dumps(raw, sort_keys=True))


def node_key() -> str | None:
    """The sha256 of what `node_facts()` reads now (`$LOCKGEN_NODE_FACTS`'s file and bytes, else the probe's raw
    answers: nvidia-smi's GPUs and driver, the C library, the machine), without validating them; None when the
    facts file cannot be read (`node_facts` words that)."""
    named = _named(None)
    if named is None:
        return _key("probed", json.dumps(_probed(), sort_keys=True))
    try:
        return _key("stated", str(named.absolute()), _stated_bytes(named).hex())
    except UserError:
        return None


def _key(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogateescape")).hexdigest()


def _named(stated: Path | None) -> Path | None:
    return stated or (Path(os.environ[NODE_FACTS_ENV]) if os.environ.get(NODE_FACTS_ENV) else None)


def probe() -> NodeFacts:
    """This node, as nvidia-smi, the C library and the kernel report it."""
    return _facts_of(_probed())


def _probed() -> dict[str, object]:
    """The probe's raw answers, plain JSON values: what `_facts_of` makes the node's facts from."""
    gpus = gpu_host.probe(topology=False)  # one nvidia-smi call: detection reads no topology
    try:
        libc = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError):  # not glibc (musl has no such name)
        libc = ""
    listed = list(zip(gpus.names, gpus.compute_capabilities)) if gpus else []
    return {
        "platform": home.native_platform(f"linux-{home.machine()}"),
        "libc": libc,
        "gpus": [list(gpu) for gpu in listed],
        "driver": gpus.driver if gpus else None,
    }


def _facts_of(raw: dict[str, object]) -> NodeFacts:
    """The node's facts from the probe's raw answers (`_probed`)."""
    from lockgen.model.node import NodeFacts, NodeGpu

    libc, gpus = str(raw["libc"]), raw["gpus"]
    assert isinstance(gpus, list)
    glibc = libc.removeprefix("glibc ").strip() if libc.startswith("glibc ") else None
    listed = tuple(NodeGpu(name=name, compute_capability=capability) for name, capability in gpus)
    return NodeFacts(platform=raw["platform"], glibc=glibc, driver=raw["driver"] if listed else None, gpus=listed)


def read(path: Path) -> NodeFacts:
    """A node facts file: `{"platform": "linux-64", "glibc": "2.35", "driver": "580.95.05",
    "gpus": [{"name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0"}]}`."""
    return _parsed(path, _stated_bytes(path))


_HINT = (
    'state the node as JSON, e.g. {"platform": "linux-64", "glibc": "2.35", "driver": "580.95.05", "gpus": '
    '[{"name": "NVIDIA H100", "compute_capability": "9.0"}]} (lockgen detect --json prints this node\'s)'
)


def _stated_bytes(path: Path) -> bytes:
    """A node facts file's bytes (a regular file of at most 1 MiB), or a `UserError` naming why not."""
    try:
        with user_files.opened(path) as handle:
            data = handle.read(_MAX_BYTES + 1)
    except OSError as exc:
        raise UserError(f"cannot read the node facts file `{path}`: {exc.strerror or exc}", _HINT) from None
    if len(data) > _MAX_BYTES:
        raise UserError(f"the node facts file `{path}` is over 1 MiB", _HINT)
    return data


def _parsed(path: Path, data: bytes) -> NodeFacts:
    """The facts a node facts file's bytes state, validated by the models."""
    from pydantic import ValidationError

    from lockgen.model.node import NodeFacts

    try:
        return NodeFacts.model_validate(nesting.loads(data.decode("utf-8")))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the document"
        message = first["msg"].removeprefix("Value error, ")
        raise UserError(f"the node facts file `{path}`: {shown(where, 60)}: {shown(message, 200)}", _HINT) from None
    except ValueError:  # not UTF-8, not JSON, or nested past any facts file
        raise UserError(f"the node facts file `{path}` is not JSON", _HINT) from None
