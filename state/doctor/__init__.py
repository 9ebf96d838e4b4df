"""`argus doctor`: a cluster's dashboard, auth, clock and GPUs examined, and one probe job proving its shared root.
May import: specs, ray, beneath, files, observed, root_key."""
