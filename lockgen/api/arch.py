"""Use case `lockgen arch`: what lockgen knows about GPU architectures (the facts and what the rules
derive from them), for every arch or one."""

from __future__ import annotations

from lockgen.core.gpu.arch_info import ArchReport, ArchRow, arch_report, arch_table
from lockgen.model.names import normalize_arch


def all_archs() -> list[ArchRow]:
    return arch_table()


def one_arch(name: str) -> ArchReport:
    return arch_report(normalize_arch(name))
