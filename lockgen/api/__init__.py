"""Use cases, one module per stage: orchestration only, wiring the pure core to the adapters.

`resolve` (stack to locks, freshness), `locks` (diff, render), `import_lock`, `freeze`, `materialize`,
`store` (list, gc), `check` (prefix and image drift), `export`, `publish` (push), `verify`, `certs`,
`arch`. Two modules are steps, not use cases: `pypi` (resolve's PyPI layer) and `shared_steps` (what
several use cases do alike: choose a platform, build an environment). A use case never imports another
use case; each takes plain values and returns plain results (`lockgen.model.results`), reporting
progress through a callback so the CLI decides how to show it.
"""
