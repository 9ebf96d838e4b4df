"""The queue's files: ledgers, quotas, usage, the apply lock and the root key."""
