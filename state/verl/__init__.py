"""What argus knows of a verl job, read from its snapshot: version, entry, composed config, rules, pools and
files. May import: specs, state.beneath, state.files, state.observed, state.root_key, state.code."""
