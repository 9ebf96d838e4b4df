"""The tamper-evident audit log on the shared root: its files, hash chain, anchor, events and follow.
Imports specs/ and the shared helpers of state/."""
