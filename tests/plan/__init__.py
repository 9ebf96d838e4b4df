"""The pure planner and admission, on plain data."""
