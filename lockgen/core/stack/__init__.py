"""The stack spec: parsing, plans, platforms, inheritance, team layouts and edits."""
