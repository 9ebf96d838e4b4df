"""Data sets and models as inputs: a hub mirror read for commits and file lists, and the stdlib fetcher a Ray job runs.
May import: specs, beneath, observed, root_key."""
