"""Renderings: argv diffs, golden plans, status summaries and the queue's views."""
