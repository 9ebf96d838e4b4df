"""A run's life on the shared root: its record, index, logs, secrets, end and failure class, settling and
checkpoints. May import: specs, beneath, files, observed, root_key."""
