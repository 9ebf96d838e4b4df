"""Runs on the shared root: records, the index, failure classes and checkpoints."""
