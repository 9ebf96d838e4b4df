"""The demand argus admitted for a run, stamped on its Ray job (`argus.demand`) and read back. Pure.

Ray's job table keeps a job's metadata as it was submitted, and no job can rewrite another's row: what
argus admitted stays readable by every workspace for as long as Ray lists the run, whatever becomes of
the ledger entry on the shared root. Compact JSON, a few dozen bytes ({"b": [[count, bundle], ...],
"d": driver, "s": spread}); read back as hostile input (any job can submit a row with any metadata: a
forged one holds what it claims only while Ray runs it, as any job's own reservation would).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from reconcile.plan.placement import Demand, Resources

LABEL = "argus.demand"
MAX_LABEL = 512
"""Bytes at most; a demand that does not fit is not stamped (the ledger still holds it for argus)."""
MAX_BUNDLES = 256
NAME = re.compile(r"[A-Za-z0-9_.:/-]{1,64}")


def stamped(bundles: tuple[Resources, ...], driver: Resources, spread: Resources) -> dict[str, str]:
    """The label for a demand ({} when it asks nothing or would be too long)."""
    groups: list[list[object]] = []
    for bundle in bundles:
        if groups and groups[-1][1] == dict(bundle):
            groups[-1][0] = int(groups[-1][0]) + 1  # type: ignore[call-overload]
        else:
            groups.append([1, dict(bundle)])
    body = {k: v for k, v in (("b", groups), ("d", dict(driver)), ("s", dict(spread))) if v}
    text = json.dumps(body, separators=(",", ":"), sort_keys=True)
    return {LABEL: text} if body and len(text) <= MAX_LABEL else {}


def read(metadata: Mapping[str, str]) -> Demand | None:
    """The demand a Ray job's label says; None when it has none, or one of another shape."""
    text = metadata.get(LABEL)
    if not isinstance(text, str) or len(text) > MAX_LABEL:
        return None
    try:
        body = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(body, dict) or set(body) - {"b", "d", "s"}:
        return None
    bundles, driver, spread = _bundles(body.get("b", [])), _amounts(body.get("d", {})), _amounts(body.get("s", {}))
    if bundles is None or driver is None or spread is None:
        return None
    return Demand(bundles=bundles, driver=driver, spread=spread)


def _bundles(groups: object) -> tuple[Resources, ...] | None:
    if not isinstance(groups, list):
        return None
    found: list[Resources] = []
    for group in groups:
        if not (isinstance(group, list) and len(group) == 2 and type(group[0]) is int and group[0] > 0):
            return None
        bundle = _amounts(group[1])
        if bundle is None or len(found) + group[0] > MAX_BUNDLES:
            return None
        found += [bundle] * group[0]
    return tuple(found)


def _amounts(value: object) -> dict[str, float] | None:
    if not isinstance(value, dict) or len(value) > 32:
        return None
    amounts = {}
    for name, amount in value.items():
        if not (NAME.fullmatch(name) and type(amount) in (int, float) and 0 <= amount <= 2**20):
            return None
        amounts[name] = float(amount)
    return amounts
