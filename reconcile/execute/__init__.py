"""Carrying out: a client per cluster, one observation and one plan (cycle), then the applier and its steps
against Ray and the shared filesystem. May import: specs, state.*, model, saved, plan."""
