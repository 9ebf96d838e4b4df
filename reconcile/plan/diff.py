"""Field-level diffs of submissions. deepdiff lives here and nowhere else."""

from __future__ import annotations

import re
from typing import Any

from reconcile.model import FieldChange

_PATH_PART = re.compile(r"\[('(?P<key>(?:[^'\\]|\\.)*)'|(?P<index>\d+))\]")


def field_diff(before: dict[str, Any] | None, after: dict[str, Any] | None) -> tuple[FieldChange, ...]:
    if before is None or after is None:
        return ()
    # only a spec changed since its last run is diffed: a first plan, or one with nothing changed, never imports it
    from deepdiff import DeepDiff

    found = DeepDiff(before, after, verbose_level=2)
    changes: list[FieldChange] = []
    for kind in ("values_changed", "type_changes"):
        for path, change in found.get(kind, {}).items():
            changes.append(FieldChange(path=dotted(path), before=change["old_value"], after=change["new_value"]))
    for kind, side in (("dictionary_item_added", "after"), ("iterable_item_added", "after"),
                       ("dictionary_item_removed", "before"), ("iterable_item_removed", "before")):
        for path, value in found.get(kind, {}).items():
            changes.append(FieldChange(path=dotted(path), **{side: value}))
    return tuple(sorted(changes, key=lambda c: c.path))


def dotted(path: str) -> str:
    """deepdiff's root['env_vars']['A'][0] as env_vars.A.0"""
    parts = [m.group("key") if m.group("key") is not None else m.group("index") for m in _PATH_PART.finditer(path)]
    return ".".join(parts)
