"""The world: Ray clusters and the shared filesystem, observed and changed, in rooms; its door is state.observe
and the small helpers beside it. May import: specs, beneath, files, observed, root_key, memo."""
