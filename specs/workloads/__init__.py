"""What a job runs: verl's command, the submission Ray is asked for, and the plain data of a run read back.
May import: base, diagnostics, errors, address, duration, kinds."""
