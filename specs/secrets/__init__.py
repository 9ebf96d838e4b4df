"""Secrets in specs and in commands: literal secret shapes, the names that may carry one, the scans.
May import: base, diagnostics, parse."""
