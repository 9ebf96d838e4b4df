"""The Ray versions argus supports, checked once per client from the head's `GET /api/version`
({"version": Jobs API version, "ray_version", "ray_commit", "session_name"}).

Oldest: 2.9 (its job server takes every field argus sends; see jobs_api.MIN_VERSION_*). Newest: 2.60,
the Ray this repository's tests run. A head outside the range, or one whose answers lack what a feature
reads, gives ONE warning naming what is lost; argus still works with it."""

from __future__ import annotations

import re
from typing import Any

OLDEST = (2, 9)
NEWEST = (2, 60)
SUPPORTED = "Ray 2.9 to 2.60"
JOBS_API_VERSIONS = ("3", "4")
"""The Jobs API versions Rays in the range report (Ray's CURRENT_VERSION in job_head.py): 2.9 says "3", 2.60
"4". Both answer every request argus makes, DELETE /api/jobs/<id> included: tests/state/ray/test_oldest_head.py
deletes on 2.9.3, so nothing is lost in the range (a head that refuses the DELETE keeps its finished rows, and
apply says so by id: reconcile.execute.refresh)."""


def version_warning(body: dict[str, Any]) -> str:
    """One sentence naming what argus loses with this head; empty when nothing is lost."""
    ray_version = body.get("ray_version")
    release = _release(ray_version if isinstance(ray_version, str) else "")
    problems: list[str] = []
    if not release:
        problems.append("its Ray version is not given")
    elif release[:2] < OLDEST or release[:2] > NEWEST:
        problems.append(f"it runs Ray {ray_version}, outside the supported {SUPPORTED}")
    api = body.get("version")
    if api is not None and str(api) not in JOBS_API_VERSIONS:
        problems.append(f"its Jobs API version is {str(api)[:20]!r}, not {' or '.join(map(repr, JOBS_API_VERSIONS))}")
    lost = []
    if not isinstance(body.get("session_name"), str) or not body.get("session_name"):
        lost.append("head-restart detection (no session_name)")
    if not problems and not lost:
        return ""
    words = "; ".join(problems) or "it answers without what argus reads"
    if lost:
        words += "; lost: " + ", ".join(lost)
    return f"the Ray head is not one argus fully supports: {words}. Upgrade the head to {SUPPORTED}."


def _release(version: str) -> tuple[int, ...]:
    match = re.match(r"^\s*v?(\d+(?:\.\d+)*)", version)
    return tuple(int(part) for part in match.group(1).split(".")) if match else ()
