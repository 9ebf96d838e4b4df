"""The planner stays pure: every module of reconcile/plan/ imports only what is on an allow-list,
calls no I/O, and importing them all loads nothing that touches the network or the disk."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLAN = ROOT / "reconcile" / "plan"

ALLOWED = {
    # the standard library's pure modules: data, text, time arithmetic (never the clock: see IO_CALLS)
    "__future__", "abc", "collections", "copy", "dataclasses", "datetime", "decimal", "difflib", "enum", "fnmatch",
    "functools", "hashlib", "itertools", "json", "math", "operator", "re", "shlex", "string", "textwrap",
    "types", "typing",
    # data models and diffs
    "pydantic", "deepdiff",
    # argus's own plain data: specs (the file readers are refused below), the plan's types, observed state
    "specs", "reconcile.model", "reconcile.plan", "state.observed",
}
"""Import roots a planner module may name; a module is allowed with everything under it."""
REFUSED = {"specs.load.loader", "specs.parse.reading", "specs.parse.safe_yaml"}
"""Under an allowed root, but they read files."""
IO_CALLS = {"open", "print", "input", "exec", "eval", "compile", "__import__", "breakpoint"}
IO_ATTRIBUTES = {"write_text", "write_bytes", "read_text", "read_bytes", "open", "mkdir", "makedirs", "unlink",
                 "rmdir", "rmtree", "rename", "touch", "chmod", "symlink_to", "iterdir", "glob", "rglob",
                 "submit_job", "stop_job", "delete_job", "system", "popen", "Popen", "check_output",
                 "getenv", "environ", "import_module", "now", "utcnow", "today", "sleep"}
"""Files, processes, Ray, the environment, the clock: the planner decides from (desired, observed) alone."""
EFFECTFUL = ("ray", "git", "requests", "urllib3", "hydra", "state.ray.client", "state.runs.records",
             "state.audit.log", "state.files", "state.observe", "state.ray.local", "state.code.gitinfo",
             "state.code.sources", "state.code.snapshots", "state.queue.lock", "reconcile.execute",
             "reconcile.commands", *REFUSED)
"""Never loaded, even indirectly (subprocess is absent: the standard library's asyncio loads it)."""


def test_every_planner_module_imports_only_allowed_modules_and_calls_no_io():
    assert {"planner.py", "code.py", "diff.py"} <= {p.name for p in PLAN.glob("*.py")}  # the walk sees them
    assert problems_in(PLAN) == []


def test_importing_every_planner_module_loads_no_effectful_module():
    modules = [f"reconcile.plan.{p.stem}" for p in sorted(PLAN.glob("*.py")) if p.stem != "__init__"]
    code = f"import sys\nfor m in {modules!r}: __import__(m)\nprint('\\n'.join(sorted(sys.modules)))"
    loaded = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert [m for m in loaded.stdout.split() if _under(m, EFFECTFUL)] == []


def test_the_check_fails_when_a_planner_module_writes_a_file(tmp_path: Path):
    copy = tmp_path / "plan"
    shutil.copytree(PLAN, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert problems_in(copy) == []
    (copy / "leak.py").write_text(
        "from pathlib import Path\n"
        "from state.runs.records import write_status\n\n\n"
        "def plan_leak(root):\n"
        "    import os\n"
        "    Path(root, 'x').write_text(os.environ['HOME'])\n"
        "    write_status(root, None)\n")
    assert problems_in(copy) == ["leak.py:1: imports pathlib", "leak.py:2: imports state.runs.records",
                                 "leak.py:6: imports os", "leak.py:7: calls .write_text", "leak.py:7: calls .environ"]


def test_the_check_sees_relative_imports_and_builtins():
    source = "from . import planner\nfrom ..execute import applier\nfrom specs.load import loader\nprint(open('x'))\n"
    assert module_problems(source, "reconcile.plan.bad") == [
        "2: imports reconcile.execute.applier", "3: imports specs.load.loader", "4: calls print()", "4: calls open()"]


def problems_in(package: Path) -> list[str]:
    """Every import off the allow-list and every I/O call, in every module of the package."""
    return [f"{path.name}:{problem}" for path in sorted(package.glob("*.py"))
            for problem in module_problems(path.read_text(), f"reconcile.plan.{path.stem}")]


def module_problems(source: str, module: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        found += [f"{node.lineno}: imports {name}" for name in _imported(node, module) if not _allowed(name)]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in IO_CALLS:
            found.append(f"{node.lineno}: calls {node.func.id}()")
        if isinstance(node, ast.Attribute) and node.attr in IO_ATTRIBUTES:
            found.append(f"{node.lineno}: calls .{node.attr}")
    return sorted(found, key=lambda line: int(line.split(":")[0]))


def _imported(node: ast.AST, module: str) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:  # relative: from the package that holds the module
        package = module.split(".")[:-node.level]
        base = ".".join(package + ([base] if base else []))
    return [f"{base}.{alias.name}" if _is_module(base, alias.name) else base for alias in node.names]


def _is_module(base: str, name: str) -> bool:
    """`from specs.load import loader` imports the module specs.load.loader; `from re import compile`, a name."""
    return (ROOT / base.replace(".", "/") / f"{name}.py").exists()


def _allowed(name: str) -> bool:
    return _under(name, ALLOWED) and not _under(name, REFUSED)


def _under(name: str, roots) -> bool:
    return any(name == root or name.startswith(root + ".") for root in roots)
