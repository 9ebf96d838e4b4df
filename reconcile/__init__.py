"""Plan and apply in rooms (plan, execute, views, serve, commands, cli); at the door the data they share (model,
report, saved) and the error boundary. May import: specs, state.observed, state.runs, model."""
