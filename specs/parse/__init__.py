"""Reading spec files as hostile input: which files, ruamel's and libyaml's parsers, line numbers of nodes.
May import: base, diagnostics, errors."""
