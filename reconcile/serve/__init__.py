"""`argus serve`: the reconcile loop, its lease, notifications and HTTP (metrics, health, status page).
May import: specs, state.*, model, report, plan, execute, views, version."""
