"""Benchmark reading a certificate into its model (`Certificate.model_validate`) with the one schema (issue 46 item 3:
figures as `Figure` records, the stack and telemetry checked as JSON, the conformance a record) against its anchor,
the same certificates read as the model read them before: every figure, the stack and the telemetry taken as
`dict[str, Any]` (no record made, no value checked). Each certificate's checks, hardware and subject are read alike
by both, so the ratio is what the schema costs a cold `fleet status` per certificate (kept verdicts skip the read).

The certificates are the examples under envs/examples (real runs, CPU to 8 GPUs; 52 today). CPU time of this
process is the figure (the machine is shared); the median of `--runs` alternating runs, each every certificate
`--repeat` times.

    python benchmarks/bench_cert_parse.py [--runs 7] [--repeat 20]
    python benchmarks/bench_cert_parse.py --smoke       (one run, each certificate once: CI)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from pydantic import create_model

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.harness import add_smoke  # noqa: E402
from lockgen.model.certificate import Certificate, CertificateBody, Subject  # noqa: E402


def untyped_model() -> type[Certificate]:
    """The certificate model as it was: figures, stack, telemetry and the subject's conformance untyped."""
    subject = create_model("UntypedSubject", __base__=Subject, conformance=(dict[str, Any] | None, None))
    body = create_model(
        "UntypedBody",
        __base__=CertificateBody,
        subject=(subject, ...),
        figures=(dict[str, dict[str, dict[str, Any]]], ...),
        stack=(dict[str, Any], ...),
        telemetry=(dict[str, Any], ...),
    )
    return create_model("UntypedCertificate", __base__=Certificate, certificate=(body, ...))


def cpu_seconds(model: type[Certificate], documents: list[dict[str, Any]], repeat: int) -> float:
    started = time.process_time()
    for _ in range(repeat):
        for document in documents:
            model.model_validate(document)
    return time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=20)
    add_smoke(parser)
    args = parser.parse_args()
    if args.smoke:
        args.runs, args.repeat = 1, 1
    documents = [json.loads(p.read_text()) for p in sorted((REPO / "envs" / "examples").rglob("*.cert.json"))]
    anchor = untyped_model()
    for model in (Certificate, anchor):  # built and warmed before timing
        cpu_seconds(model, documents, 1)
    typed, untyped = [], []
    for _ in range(args.runs):
        typed.append(cpu_seconds(Certificate, documents, args.repeat))
        untyped.append(cpu_seconds(anchor, documents, args.repeat))
    reads = len(documents) * args.repeat
    schema, before = statistics.median(typed) / reads * 1e6, statistics.median(untyped) / reads * 1e6
    print(f"{len(documents)} certificates x {args.repeat}, median of {args.runs} runs, CPU per certificate:")
    print(f"  one schema (typed figures, JSON checked): {schema:.0f} us")
    print(f"  anchor (figures, stack, telemetry as dict[str, Any]): {before:.0f} us")
    print(f"  ratio {schema / before:.2f}; for 10,000 certificates {(schema - before) * 1e4 / 1e6:+.2f} s CPU")


if __name__ == "__main__":
    main()
