"""Desired state: the kinds, the YAML loader that builds them, in rooms; at the door the helpers all rooms share
and desired.py, what the loader builds. May import: base, diagnostics, errors, address, duration."""
