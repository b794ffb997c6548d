"""This node's facts for `lockgen detect`: the one place lockgen reads the local hardware to choose a target
(resolving never does). Its GPUs and driver from `nvidia-smi` (`gpu_host.probe`), its glibc from
`confstr(CS_GNU_LIBC_VERSION)`, its conda platform from `uname -m`. For tests and dry runs a JSON file states
them instead (`detect --node FILE`, or `$LOCKGEN_NODE_FACTS` for every command), in the shape
`detect --json` prints under `node`."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import ValidationError

from lockgen.adapters import home, user_files
from lockgen.adapters.node import gpu_host
from lockgen.core import nesting
from lockgen.model.names import shown
from lockgen.errors import UserError
from lockgen.model.node import NodeFacts, NodeGpu

NODE_FACTS_ENV = "LOCKGEN_NODE_FACTS"
_MAX_BYTES = 1 << 20


def node_facts(stated: Path | None = None) -> NodeFacts:
    """The facts in `stated`, else in the file `$LOCKGEN_NODE_FACTS` names, else this node's, probed."""
    named = stated or (Path(os.environ[NODE_FACTS_ENV]) if os.environ.get(NODE_FACTS_ENV) else None)
    return read(named) if named is not None else probe()


def probe() -> NodeFacts:
    """This node, as nvidia-smi, the C library and the kernel report it."""
    gpus = gpu_host.probe()
    try:
        libc = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError):  # not glibc (musl has no such name)
        libc = ""
    glibc = libc.removeprefix("glibc ").strip() if libc.startswith("glibc ") else None
    listed = (
        tuple(
            NodeGpu(name=name, compute_capability=capability)
            for name, capability in zip(gpus.names, gpus.compute_capabilities)
        )
        if gpus
        else ()
    )
    return NodeFacts(
        platform=home.native_platform(f"linux-{home.machine()}"),
        glibc=glibc,
        driver=gpus.driver if listed and gpus else None,
        gpus=listed,
    )


def read(path: Path) -> NodeFacts:
    """A node facts file: `{"platform": "linux-64", "glibc": "2.35", "driver": "580.95.05",
    "gpus": [{"name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0"}]}`."""
    hint = (
        'state the node as JSON, e.g. {"platform": "linux-64", "glibc": "2.35", "driver": "580.95.05", "gpus": '
        '[{"name": "NVIDIA H100", "compute_capability": "9.0"}]} (lockgen detect --json prints this node\'s)'
    )
    try:
        with user_files.opened(path) as handle:
            data = handle.read(_MAX_BYTES + 1)
    except OSError as exc:
        raise UserError(f"cannot read the node facts file `{path}`: {exc.strerror or exc}", hint) from None
    if len(data) > _MAX_BYTES:
        raise UserError(f"the node facts file `{path}` is over 1 MiB", hint)
    try:
        return NodeFacts.model_validate(nesting.loads(data.decode("utf-8")))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the document"
        message = first["msg"].removeprefix("Value error, ")
        raise UserError(f"the node facts file `{path}`: {shown(where, 60)}: {shown(message, 200)}", hint) from None
    except ValueError:  # not UTF-8, not JSON, or nested past any facts file
        raise UserError(f"the node facts file `{path}` is not JSON", hint) from None
