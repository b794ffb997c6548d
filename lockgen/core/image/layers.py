"""Plans image layers: one layer per package, so a one-package update changes one layer and targets share
the layers of the packages they share. Past the layer budget, the smallest packages are grouped,
by a stable rule (sorted by name, filled up to the size of the largest group's neighbour), so the
grouping of unchanged packages does not move when one package changes."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LayerPlan:
    name: str
    members: tuple[str, ...]  # package keys
    size: int


def plan_layers(packages: dict[str, int], budget: int = 100) -> list[LayerPlan]:
    """`packages`: key -> bytes. Big packages get their own layer; when there are more packages than
    the budget allows, the smallest ones share layers in name order, in chunks of equal count."""
    if budget < 2:
        raise ValueError("the layer budget must be at least 2")
    ordered = sorted(packages, key=lambda key: (-packages[key], key))
    if len(ordered) <= budget:
        return [LayerPlan(key, (key,), packages[key]) for key in sorted(packages)]
    alone = ordered[: budget // 2]
    small = sorted(ordered[budget // 2 :])
    slots = budget - len(alone)
    per_group = -(-len(small) // slots)
    groups = [small[i : i + per_group] for i in range(0, len(small), per_group)]
    layers = [LayerPlan(key, (key,), packages[key]) for key in sorted(alone)]
    layers += [LayerPlan(f"{group[0]}..{group[-1]}", tuple(group), sum(packages[k] for k in group)) for group in groups]
    return layers
