"""The shared root's own marks: its identity (proof that this is the root argus laid out).
May import: specs, beneath, files, observed, root_key."""
