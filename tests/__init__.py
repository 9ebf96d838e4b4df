"""argus's tests, in rooms that mirror the code's (specs/, state/<room>/, plan/, execute/, views/, serve/,
commands/), beside cluster/ (end to end on real Ray), attacks/ (hostile input) and house/ (the layout's rules)."""
