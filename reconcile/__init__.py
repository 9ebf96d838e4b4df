"""Plan and apply: the pure planner, its renderings, the applier, and the CLI."""
