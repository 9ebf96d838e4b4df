"""Desired state: the models of argus resources and the YAML loader that builds them.
May import: nothing of argus (specs is the ground floor)."""
