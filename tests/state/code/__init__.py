"""The code shelf: git sources, tokens and snapshots."""
