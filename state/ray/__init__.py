"""The Ray adapter: argus's own client of the dashboard's REST API, its auth and deadlines, and the
local cluster `argus local` starts. Imports specs/ and the shared helpers of state/ only."""
