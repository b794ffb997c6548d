"""Steps: what several use cases do alike, below them and never a command of their own.

A use case (a module of `lockgen.api`) may import any step here; a step may import another step but never a
use case. docs/architecture.md's "Steps" table names each module of this package, and tests/test_architecture.py
keeps the two equal.
"""
