"""`python -m lockgen` runs the command-line interface."""

from lockgen.cli import main

main()
