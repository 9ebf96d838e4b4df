"""The admission queue's files on the shared root: ledgers, quotas, liveness holders, the serve lease, locks,
sent events and usage. May import: specs, beneath, files, observed, root_key, runs, audit."""
