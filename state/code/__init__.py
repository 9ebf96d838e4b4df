"""The code shelf: git sources read through safe git, working copies, snapshots on the shared root and argus's
private cache. May import: specs, beneath, files, observed, root_key, memo, runs, audit."""
