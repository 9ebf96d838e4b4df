"""The loader and the models of specs/: every problem located at file:line."""
