"""The Ray adapter: argus's own client of the dashboard's REST API, its auth and deadlines, and the local
cluster `argus local` starts. May import: specs, beneath, files, observed, root_key."""
