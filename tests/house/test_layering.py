"""Arrows run one way: every import between argus's rooms is one the importing room allows.

Each room's `__init__.py` (and a floor's, for the modules at its door) says `May import: ...`; a
module may say it for itself in its own docstring. The check reads those lines and walks every
import in every module, lazy ones inside functions and `TYPE_CHECKING` ones included: a back-arrow
hidden in a function body is still a circle in the design. A pattern `state.*` allows the floor and
everything under it; a room may always import itself.
"""

from __future__ import annotations

import ast
import functools
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FLOORS = ("specs", "state", "reconcile")
MAY_IMPORT = re.compile(r"May import:\s*(.*?)\.(?:\s|$)", re.S)


@dataclass(frozen=True)
class Arrow:
    source: str
    target: str
    where: str


@functools.lru_cache(maxsize=8192)
def unit_of(module: str, root: Path) -> str:
    """The room a module lives in: `state.runs` for state.runs.records, `state.observe` for a module at a
    floor's door."""
    parts = module.split(".")
    if len(parts) == 1:
        return parts[0]
    return ".".join(parts[:2]) if (root / parts[0] / parts[1]).is_dir() or len(parts) == 2 else parts[0]


def allowed(pattern_text: str, floor: str) -> frozenset[str]:
    """`runs` in a room of state/ is state.runs: a name that is not a floor is one of the room's own floor; a floor's
    bare name (`specs`) is the whole floor."""
    if pattern_text.strip().startswith("nothing of argus"):
        return frozenset()
    names = (p.strip() for p in pattern_text.replace("\n", " ").split(","))
    return frozenset(f"{n}.*" if n in FLOORS else n if n.split(".")[0] in FLOORS else f"{floor}.{n}"
                     for n in names if n)


def rules(root: Path) -> dict[str, frozenset[str]]:
    """Unit -> the patterns it may import: a room's from its __init__, a door module's from its own
    docstring or else its floor's __init__."""
    _forget_the_tree()
    found: dict[str, frozenset[str]] = {}
    for floor in FLOORS:
        for path in sorted((root / floor).rglob("*.py")):
            said = _said(path, floor)
            module = _module(path, root)
            if path.name == "__init__.py" and path.parent.name != floor:
                found[unit_of(module + ".x", root)] = said if said is not None else _missing(path)
            elif path.parent.name == floor and path.name != "__init__.py":
                floor_rule = _said(root / floor / "__init__.py", floor)
                found[module] = said if said is not None else floor_rule if floor_rule is not None else _missing(path)
        found.setdefault(floor, _said(root / floor / "__init__.py", floor) or frozenset())
    return found


def _missing(path: Path) -> frozenset[str]:
    raise AssertionError(f"{path}: its docstring says nothing of what it may import (a line 'May import: ...')")


def _forget_the_tree() -> None:
    """unit_of and _exists look at directories, which a test may add or plant in between two walks (never during
    one): each walk starts afresh."""
    unit_of.cache_clear()
    _exists.cache_clear()


def _parsed(path: Path) -> ast.Module:
    stat = path.stat()
    return _parse(path, stat.st_mtime_ns, stat.st_size)


def _parse(path: Path, mtime: int, size: int) -> ast.Module:
    """The planted checks read the whole house once per plant, each test in a copy of its own: only the planted file
    is new text."""
    return _parse_text(path.read_text())


@functools.lru_cache(maxsize=4096)
def _parse_text(text: str) -> ast.Module:
    return ast.parse(text)


def _said(path: Path, floor: str) -> frozenset[str] | None:
    doc = ast.get_docstring(_parsed(path)) or ""
    match = MAY_IMPORT.search(doc)
    return allowed(match.group(1), floor) if match else None


def _module(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def arrows(root: Path) -> list[Arrow]:
    """Every import of one argus module by another, as (importing unit, imported module, file:line)."""
    _forget_the_tree()
    found = []
    for floor in FLOORS:
        for path in sorted((root / floor).rglob("*.py")):
            module = _module(path, root)
            package = module if path.name == "__init__.py" else module.rpartition(".")[0]
            stat = path.stat()
            for line, target in _imports_in(path, stat.st_mtime_ns, stat.st_size, package):
                found.append(Arrow(unit_of(module, root), target, f"{path.relative_to(root)}:{line}"))
    return found


@functools.lru_cache(maxsize=4096)
def _imports_in(path: Path, mtime: int, size: int, package: str) -> tuple[tuple[int, str], ...]:
    return _imports_in_text(path.read_text(), package)


@functools.lru_cache(maxsize=4096)
def _imports_in_text(text: str, package: str) -> tuple[tuple[int, str], ...]:
    return tuple((node.lineno, target) for node in ast.walk(_parse_text(text))
                 for target in _imported(node, package) if target.split(".")[0] in FLOORS)


def _imported(node: ast.AST, package: str) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:  # relative: resolved against the importing package
        anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join([*anchor, *([base] if base else [])])
    return [base, *(f"{base}.{alias.name}" for alias in node.names)] if node.names else [base]


def permits(patterns: frozenset[str], source: str, target: str, root: Path) -> bool:
    unit = unit_of(target, root)
    if unit == source or target.split(".")[0] == source:
        return True
    for pattern in patterns:
        if pattern.endswith(".*") and (target == pattern[:-2] or target.startswith(pattern[:-1])):
            return True
        if unit == pattern or target == pattern:
            return True
    return False


def back_arrows(root: Path) -> list[str]:
    table = rules(root)
    wrong = set()
    for arrow in arrows(root):
        target = arrow.target
        if target in FLOORS or not _exists(target, root):
            continue  # `from state import beneath` is checked as state.beneath; `from x import name` as x
        if not permits(table[arrow.source], arrow.source, target, root):
            wrong.add(f"{arrow.where}: {arrow.source} imports {target}, which it may not "
                      f"(May import: {', '.join(sorted(table[arrow.source])) or 'nothing of argus'})")
    return sorted(wrong)


@functools.lru_cache(maxsize=8192)
def _exists(module: str, root: Path) -> bool:
    path = root.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


# --- the house as it is ---------------------------------------------------------------------------------------------

def test_every_arrow_between_rooms_runs_the_way_its_room_allows():
    assert back_arrows(ROOT) == []


def test_every_room_says_what_it_holds_and_what_it_may_import_in_two_lines():
    for floor in FLOORS:
        for init in sorted((ROOT / floor).rglob("__init__.py")):
            doc = ast.get_docstring(_parsed(init))
            assert doc and len(doc.splitlines()) == 2 and MAY_IMPORT.search(doc), init


def test_the_rooms_form_no_circle():
    """Stronger than each rule alone: no two rooms import each other, however they are allowed."""
    pairs = {(a.source, unit_of(a.target, ROOT)) for a in arrows(ROOT) if _exists(a.target, ROOT)}
    circles = sorted(f"{a} <-> {b}" for a, b in pairs if a < b and (b, a) in pairs)
    assert circles == []


def test_views_do_not_import_serve_and_serve_does_not_import_commands():
    table = rules(ROOT)
    assert not permits(table["reconcile.views"], "reconcile.views", "reconcile.serve.loop", ROOT)
    assert not permits(table["reconcile.serve"], "reconcile.serve", "reconcile.commands.common", ROOT)
    assert not permits(table["reconcile.plan"], "reconcile.plan", "state.ray.client", ROOT)


# --- the check catches what it must ---------------------------------------------------------------------------------

@pytest.fixture
def house(tmp_path: Path) -> Path:
    for floor in FLOORS:
        shutil.copytree(ROOT / floor, tmp_path / floor, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def _rooms(root: Path) -> list[str]:
    return sorted(rule for rule in rules(root) if "." in rule and (root / rule.replace(".", "/")).is_dir())


def _forbidden_for(unit: str, root: Path, same_floor: bool = False) -> str:
    """A module the room may not import: the highest room first (an arrow back up the house)."""
    table = rules(root)
    for target in ("reconcile.cli", "reconcile.commands.common", "reconcile.serve.loop", "reconcile.views.human",
                   "reconcile.execute.applier", "state.observe", "state.queue.lease", "state.verl.checks",
                   "specs.load.loader", "specs.schema.schema", "specs.workloads.verl", "specs.kinds.models"):
        if same_floor and target.split(".")[0] != unit.split(".")[0]:
            continue
        if unit_of(target, root) != unit and not permits(table[unit], unit, target, root):
            return target
    raise AssertionError(f"{unit} may import every room: nothing to plant")


def test_the_house_has_the_rooms_the_design_names(house: Path):
    assert {"state.ray", "state.runs", "state.audit", "state.code", "state.verl", "state.queue", "state.inputs",
            "reconcile.plan", "reconcile.execute", "reconcile.views", "reconcile.serve",
            "reconcile.commands", "specs.parse", "specs.secrets", "specs.kinds", "specs.workloads", "specs.load",
            "specs.schema"} <= set(_rooms(house))


@pytest.mark.parametrize("how", ["top", "lazy", "type_checking", "relative"])
def test_a_back_arrow_planted_in_any_room_is_caught(house: Path, how: str):
    assert back_arrows(house) == []
    for room in _rooms(house):
        target = _forbidden_for(room, house, same_floor=how == "relative")
        planted = house.joinpath(*room.split(".")) / "planted.py"
        planted.write_text(_planted_source(target, how, room))
        caught = back_arrows(house)
        assert any(line.startswith(f"{planted.relative_to(house)}:") and target.rsplit(".", 1)[0] in line
                   for line in caught), (room, target, caught)
        planted.unlink()


def _planted_source(target: str, how: str, room: str) -> str:
    module, _, name = target.rpartition(".")
    if how == "top":
        return f"from {module} import {name}\n"
    if how == "lazy":
        return f"def later():\n    from {module} import {name}\n    return {name}\n"
    if how == "type_checking":
        return f"from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from {module} import {name}\n"
    below_floor = module.partition(".")[2]  # from the room's package up to its floor, then down to the target
    return f"from ..{below_floor} import {name}\n"


def test_a_module_at_a_floors_door_follows_the_floors_rule(house: Path):
    (house / "state" / "planted.py").write_text("from state.ray.client import RayClient\n")
    assert any("state/planted.py:1" in line for line in back_arrows(house))


def test_a_room_without_a_rule_is_an_error_not_a_free_pass(house: Path):
    (house / "state" / "newroom").mkdir()
    (house / "state" / "newroom" / "__init__.py").write_text('"""A room that says nothing of its imports."""\n')
    with pytest.raises(AssertionError, match="May import"):
        rules(house)
