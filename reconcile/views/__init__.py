"""Renderings of plans and status: human, JSON, markdown, the status page. Views take data and return text.
May import: specs, state.observed, state.runs, state.doctor, model, report, plan, execute."""
