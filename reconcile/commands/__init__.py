"""One module per CLI command; each exposes run(...) -> exit code.
May import: specs, state.*, model, report, saved, boundary, plan, execute, views, serve."""
