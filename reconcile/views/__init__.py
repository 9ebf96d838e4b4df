"""Renderings of plans and status: human, JSON, markdown, the status page. Views take data and return text.
May import: specs, state.observed, state.runs, reconcile.model, reconcile.report, reconcile.plan, reconcile.execute."""
