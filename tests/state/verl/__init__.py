"""verl jobs checked against the verl of their snapshot: composed configs, rules, real scripts."""
