"""The append-only audit log: <shared_root>/.argus/audit/<workspace>.jsonl, one JSON line an event."""

from __future__ import annotations

import getpass
import json
import os
import socket
from pathlib import Path
from typing import Any

from state.files import append_line
from state.records import now

# CI systems name the person behind a run in these variables; the first one set wins.
CI_ACTOR_VARIABLES = ("GITHUB_ACTOR", "GITLAB_USER_LOGIN", "BUILDKITE_BUILD_CREATOR", "ARGUS_ACTOR")


def audit_path(shared_root: str, workspace: str) -> Path:
    return Path(shared_root) / ".argus" / "audit" / f"{workspace}.jsonl"


def append(shared_root: str, workspace: str, event: dict[str, Any]) -> None:
    entry = {"time": now(), "actor": actor(), "host": socket.gethostname(), **event}
    append_line(audit_path(shared_root, workspace), json.dumps(entry, sort_keys=True))


def read(shared_root: str, workspace: str) -> list[dict[str, Any]]:
    path = audit_path(shared_root, workspace)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def last_applied_plan(shared_roots: list[str], workspace: str) -> str | None:
    """The plan id of the newest apply that finished, across the workspace's shared roots."""
    ends = [e for root in sorted(set(shared_roots)) for e in read(root, workspace)
            if e.get("event") == "apply.end" and e.get("outcome") == "ok"]
    return max(ends, key=lambda e: e["time"])["plan_id"] if ends else None


def actor() -> str:
    for name in CI_ACTOR_VARIABLES:
        if os.environ.get(name):
            return f"{os.environ[name]} (via {name})"
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid:{os.getuid()}"
