"""Use cases, one module per command family: orchestration only, wiring the pure core to the adapters.

Step modules live in `lockgen.api.steps` (`*_steps`, and `pypi`, resolve's PyPI layer), below the use cases,
holding what several of them do alike; a use case never imports another use case. docs/architecture.md lists every use
case
and step with what it holds, and tests/test_architecture.py keeps that list equal to this package. Each
use case takes plain values and returns plain results (`lockgen.model.results`), reporting progress
through a callback so the CLI decides how to show it.
"""
