"""The applier, its steps, concurrent submits and the entrypoint wrapper."""
