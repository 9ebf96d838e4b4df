"""The node's fetcher run as Ray runs an entrypoint, for tests of state/inputs: a shell command from `/`, with the
test's python and no PYTHONPATH, so an import of argus in the fetcher would not be found through the checkout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from state.inputs import fetch_job


def run(spec: dict, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | (env or {})
    return subprocess.run(fetch_job.entrypoint(spec, python=sys.executable), shell=True, cwd="/", env=clean,
                          capture_output=True, text=True, timeout=60)


def leftovers(parent: Path) -> list[str]:
    """What is in a final path's parent: after a refusal, no staging directory and no final path."""
    return sorted(p.name for p in parent.iterdir()) if parent.exists() else []
