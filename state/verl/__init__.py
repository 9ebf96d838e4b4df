"""What argus knows of a verl job, read from its snapshot: version, entry, composed config, rules, pools and
files. May import: specs, beneath, files, observed, root_key, memo, code."""
