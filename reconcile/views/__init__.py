"""Renderings of plans and status: human, JSON, markdown, the status page. Views take data and return text.
May import: specs, state.observed, state.runs, model, report, plan, execute."""
