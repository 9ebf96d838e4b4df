"""The CLI's commands: exit codes, errors, saved plans, merges, init and CI recipes."""
