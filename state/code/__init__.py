"""The code shelf: git sources read through safe git, working copies, snapshots on the shared root and argus's
private cache. May import: specs, state.beneath, state.files, state.observed, state.root_key, state.runs, state.audit."""
