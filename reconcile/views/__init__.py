"""Renderings of plans and status: human, JSON, markdown. Views take data and return text."""
