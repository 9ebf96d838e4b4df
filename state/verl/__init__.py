"""What argus knows of a verl job, read from its snapshot: version, entry, composed config, rules,
pools and files. Imports specs/, state.code and the shared helpers of state/."""
