"""The planner must stay pure: importing it pulls in nothing that touches the network or disk."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

FORBIDDEN = ("ray", "git", "requests", "urllib3", "state.ray_client", "state.records", "state.audit",
             "state.files", "state.observe", "state.local", "state.gitinfo", "reconcile.execute.applier")
ROOT = Path(__file__).resolve().parents[1]


def test_importing_the_planner_loads_no_effectful_module():
    code = "import sys, reconcile.plan.planner; print('\\n'.join(sorted(sys.modules)))"
    loaded = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    modules = loaded.stdout.split()
    bad = [m for m in modules if any(m == f or m.startswith(f + ".") for f in FORBIDDEN)]
    assert bad == []


def test_the_planner_source_calls_no_io():
    tree = ast.parse((ROOT / "reconcile" / "plan" / "planner.py").read_text())
    calls = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert not calls & {"open", "print", "input", "exec", "eval"}
    attrs = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    assert not attrs & {"write_text", "write_bytes", "mkdir", "unlink", "submit_job", "stop_job", "system"}
