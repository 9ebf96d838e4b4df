"""Carrying out a plan: the applier and its steps against Ray and the shared filesystem."""
