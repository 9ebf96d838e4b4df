"""One module per CLI command; each exposes run(...) -> exit code.
May import: specs, state.*, model, report, saved, boundary, version, plan, execute, views, serve."""
