"""The world: adapters that observe the Ray cluster and the shared filesystem, and change them."""
