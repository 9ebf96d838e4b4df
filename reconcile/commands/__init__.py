"""One module per CLI command; each exposes run(...) -> exit code."""
