"""The node under test and its certificates: its GPU and facts, the verify kernel's process, inventories, signing, and
the kept verdicts of signed certificates."""
