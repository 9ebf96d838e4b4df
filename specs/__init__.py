"""Desired state: the models of argus resources and the YAML loader that builds them."""
