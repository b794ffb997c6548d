"""The YAML Kubernetes reads, written with pyyaml: documents with sorted keys, block scalars for text with
line breaks (a lock, a shell loop), after a comment saying what wrote them, so the same manifests give the
same bytes on every run and every machine."""

from __future__ import annotations

import yaml

from lockgen.model.json_values import JsonObject


class _Dumper(yaml.SafeDumper):
    """pyyaml's safe dumper, with `|` blocks for multi-line strings and no `&anchors`: a mapping used twice
    (a selector and its pod's labels) is written out twice, as people write manifests."""

    def ignore_aliases(self, data: object) -> bool:
        return True


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_Dumper.add_representer(str, _text)


def render_documents(documents: list[JsonObject], heading: str) -> str:
    """`documents` as one YAML stream (`---` before each), preceded by `heading` as comment lines."""
    body = yaml.dump_all(
        documents,
        Dumper=_Dumper,
        sort_keys=True,
        default_flow_style=False,
        width=120,
        allow_unicode=True,
        explicit_start=True,
    )
    return "".join(f"# {line}\n" for line in heading.splitlines()) + body
