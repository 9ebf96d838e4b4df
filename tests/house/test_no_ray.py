"""argus never imports Ray, and its base install has none: Ray is the `ray` CLI that `argus local` runs (the
`local` extra) and the runtime of jobs. So the pre-commit hook, CI's plan and apply, and serve install only
what argus imports (a fresh venv installing argus-ray without the extra measured 49 s and 105 MB; with
Ray's wheel it is several times that)."""

from __future__ import annotations

import ast
import importlib.metadata
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("specs", "state", "reconcile")


def ray_imports(root: Path) -> list[str]:
    """`file:line` of every import of ray (or ray.*) in argus's packages under `root`, lazy ones included."""
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
                if any(name == "ray" or name.startswith("ray.") for name in names):
                    found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_argus_never_imports_ray():
    assert ray_imports(ROOT) == []


def test_the_check_finds_a_planted_lazy_import(tmp_path: Path):
    for package in PACKAGES:
        (tmp_path / package).mkdir()
    (tmp_path / "state" / "planted.py").write_text("def f():\n    from ray.job_submission import X\n    return X\n")
    (tmp_path / "reconcile" / "also.py").write_text("import os, ray\nfrom rayon import y\n")
    assert sorted(ray_imports(tmp_path)) == ["reconcile/also.py:1", "state/planted.py:2"]


def _ray_requirements(requirements: list[str]) -> list[str]:
    return [r for r in requirements if re.match(r"ray\b", r)]


def test_ray_is_only_in_the_local_extra_of_the_package():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert _ray_requirements(project["dependencies"]) == []
    assert _ray_requirements(project["optional-dependencies"]["local"]) == ["ray[default]==2.60.0"]
    installed = importlib.metadata.requires("argus-ray") or []  # the metadata pip installs from (Requires-Dist)
    assert _ray_requirements(installed) != []
    assert all(re.search(r"""extra == ["']local["']""", r) for r in _ray_requirements(installed)), installed
    for imported in ("requests", "aiohttp"):  # ray brought these before; argus imports them itself
        assert any(re.match(rf"{imported}\b", r) and "extra" not in r for r in installed), imported
