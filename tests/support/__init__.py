"""What the test rooms share beside conftest's fixtures: clusters and polling, workspaces, the isolated
environment, and the loopback servers that play git over HTTPS and a hostile dashboard."""
