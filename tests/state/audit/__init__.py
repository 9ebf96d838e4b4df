"""The audit log: its chain, anchor, follower and group commit."""
