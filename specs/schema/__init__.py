"""The JSON Schema of every kind, and the rules it states beyond the models' types, for editors.
May import: base, kinds, secrets."""
