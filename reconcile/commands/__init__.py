"""One module per CLI command; each exposes run(...) -> exit code.
May import: specs, state.*, reconcile.model, reconcile.report, reconcile.saved, reconcile.boundary, reconcile.plan, reconcile.execute, reconcile.views, reconcile.serve."""
