"""A test module is a leaf: no module under tests/ imports a test module (`tests.<room>.test_*`, a bare
`test_*`, or one by a relative import), lazily inside a function or not. What rooms share lives in
tests/support/ and conftest's fixtures, so moving, renaming or deleting a test module never breaks
another room, and running one module never imports another's fixtures into it."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_module_under_tests_imports_a_test_module():
    walked = list(TESTS.rglob("test_*.py"))
    assert len(walked) > 50 and Path(__file__) in walked  # the walk sees the rooms, this one included
    assert problems_in(TESTS) == []


def test_the_check_names_a_planted_import_by_file_and_line(tmp_path: Path):
    copy = tmp_path / "tests"
    shutil.copytree(TESTS, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert problems_in(copy) == []
    (copy / "views" / "test_planted.py").write_text(
        "from tests.plan.test_planner import job\n"
        "from tests.support.planning import desired\n\n\n"
        "def test_planted():\n"
        "    from ..serve import test_notify\n"
        "    assert job and desired and test_notify\n")
    assert problems_in(copy) == ["tests/views/test_planted.py:1: imports tests.plan.test_planner",
                                 "tests/views/test_planted.py:6: imports ..serve.test_notify"]


def test_the_check_sees_every_form_of_import():
    source = ("import test_helpers\n"
              "import tests.plan.test_planner as planner\n"
              "from test_helpers import make\n"
              "from tests.plan import test_planner\n"
              "from . import test_sibling\n"
              "from .test_sibling import thing\n"
              "from tests.support.planning import job\n"
              "from tests.plan import conftest\n"
              "from unittest import TestCase\n"
              "import test\n\n\n"
              "def f():\n"
              "    from tests.serve.test_notify import event\n")
    assert imported_test_modules(source) == [
        (1, "test_helpers"), (2, "tests.plan.test_planner"), (3, "test_helpers"), (4, "tests.plan.test_planner"),
        (5, ".test_sibling"), (6, ".test_sibling"), (14, "tests.serve.test_notify")]


def problems_in(tests: Path) -> list[str]:
    """`file:line: imports module` for every import of a test module in every module under `tests`."""
    return [f"{path.relative_to(tests.parent)}:{line}: imports {name}" for path in sorted(tests.rglob("*.py"))
            for line, name in imported_test_modules(path.read_text())]


def imported_test_modules(source: str) -> list[tuple[int, str]]:
    """(line, module) of each test module the source imports, by line."""
    found = []
    for node in ast.walk(ast.parse(source)):
        found += [(node.lineno, name) for name in _imported(node) if _is_test_module(name)]
    return sorted(found)


def _imported(node: ast.AST) -> list[str]:
    """The modules an import names; `from package import name` may name the module package.name."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = "." * node.level + (node.module or "")
    if _is_test_module(base):
        return [base]
    return [base + alias.name if base.endswith(".") else f"{base}.{alias.name}" for alias in node.names]


def _is_test_module(name: str) -> bool:
    return any(part.startswith("test_") for part in name.lstrip(".").split("."))
