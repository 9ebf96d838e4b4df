"""What `argus doctor` says of a cluster: one Check per thing it examined, each ok, warn or fail, with what
to do; the facts behind them for machines. Plain data."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Level = Literal["ok", "warn", "fail"]


@dataclass(frozen=True)
class Check:
    """One line of the doctor's answer."""

    name: str
    """What was examined: dashboard, auth, nodes, clock, probe, shared-root, argus-state, cleanup."""
    level: Level
    message: str
    """What argus found, and (for warn and fail) what to do about it."""


@dataclass(frozen=True)
class ClusterExam:
    """Every check of one cluster, and the facts they were made from."""

    cluster: str
    address: str
    shared_root: str
    checks: tuple[Check, ...]
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return any(check.level == "fail" for check in self.checks)

    @property
    def warnings(self) -> int:
        return sum(check.level == "warn" for check in self.checks)


def ok(name: str, message: str) -> Check:
    return Check(name, "ok", message)


def warn(name: str, message: str) -> Check:
    return Check(name, "warn", message)


def fail(name: str, message: str) -> Check:
    return Check(name, "fail", message)
