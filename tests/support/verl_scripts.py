"""verl's example scripts as argus specs (tests/state/verl/verl_scripts/) and the verl versions they are
composed against: shared by the verl script tests and their fixtures (tests/state/verl/conftest.py)."""

from __future__ import annotations

from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[1] / "state" / "verl" / "verl_scripts"
VERSIONS = ("0.8.0", "0.9.1")
