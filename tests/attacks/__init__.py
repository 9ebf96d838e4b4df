"""Hostile specs, files, ledgers, jobs and dashboards: each attack's effect never happens."""
