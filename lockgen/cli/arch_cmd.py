"""`lockgen arch [ARCH]`: what lockgen knows about GPU architectures, drivers and PyTorch builds."""

from __future__ import annotations

from typing import Optional

import typer

from lockgen.cli.ui import handles_errors, print_json, say


@handles_errors
def arch(
    name: Optional[str] = typer.Argument(None, help="An arch such as sm90; without it, list them all."),
    as_json: bool = typer.Option(False, "--json", help="Print as JSON."),
) -> None:
    """List known GPU architectures, or show one: GPUs, CUDA range, driver floor, PyTorch kernels."""
    from lockgen.api.arch import all_archs, one_arch

    if name is None:
        rows = all_archs()
        if as_json:
            print_json(rows)
            return
        width = max(len(row["family"]) for row in rows) + 2  # whole family names, never cut mid-word
        say(f"{'arch':<7}{'cc':<6}{'cuda':<13}{'family':<{width}}gpus")
        for row in rows:
            cuda = f"{row['first_cuda']}-{row['last_cuda'] or ''}"
            gpus = ", ".join(row["gpus"][:3])
            say(f"{row['arch']:<7}{row['compute_capability']:<6}{cuda:<13}{row['family']:<{width}}{gpus}")
        return
    report = one_arch(name)
    if as_json:
        print_json(report)
        return
    for key, value in report.items():
        if isinstance(value, list) and value:
            say(f"{key}:")
            for item in value:
                say(f"  - {item}")
        else:
            say(f"{key}: {value if value != [] else 'none'}")
