"""`argus serve`: the loop, its events and notifications, the watch, the lease and the status page."""
