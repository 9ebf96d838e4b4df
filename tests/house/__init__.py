"""The rules of the layout: arrows one way, a pure planner, isolated tests."""
