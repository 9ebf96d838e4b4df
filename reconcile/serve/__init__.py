"""`argus serve`: the reconcile loop, its lease, notifications and HTTP (metrics, health, status page).
May import: specs, state.*, reconcile.model, reconcile.report, reconcile.plan, reconcile.execute, reconcile.views."""
