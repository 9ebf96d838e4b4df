"""Pure planning: (desired, observed) to a Plan; nothing here touches disk or network (a test walks it).
May import: specs, state.observed, state.runs, model."""
