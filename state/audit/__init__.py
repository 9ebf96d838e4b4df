"""The tamper-evident audit log on the shared root: its files, hash chain, anchor, events and follow.
May import: specs, state.beneath, state.files, state.observed, state.root_key, state.runs."""
