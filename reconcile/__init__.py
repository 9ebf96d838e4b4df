"""Plan and apply, in rooms: the pure planner, the executor, views, the loop, the commands and the CLI; beside
them the data all share (model, report, saved) and the error boundary. May import: specs, state.observed, state.runs, reconcile.model."""
