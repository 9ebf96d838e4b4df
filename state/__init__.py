"""The world: Ray clusters and the shared filesystem, observed and changed, in rooms; its door is state.observe
and the small helpers beside it. May import: specs, state.beneath, state.files, state.observed, state.root_key."""
