"""The admission queue's files on the shared root: ledgers, quotas, liveness holders, the serve lease, locks,
sent events and usage. May import: specs, state.beneath, state.files, state.observed, state.root_key, state.runs, state.audit."""
