"""The loader: spec files to a DesiredState, with the checks across fields, resources and workspaces.
May import: base, diagnostics, errors, address, duration, desired, parse, secrets, kinds, workloads."""
