"""Pure functions: parsing, planning, arch rules, lock building and comparison. No I/O beyond package data."""
