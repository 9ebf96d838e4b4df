"""The tamper-evident audit log on the shared root: its files, hash chain, anchor, events and follow.
May import: specs, beneath, files, observed, root_key, runs."""
