"""What proves an environment unchanged: stat walks, kept verdicts, bytecode and xattr checks, the store scrub."""
