"""When each running run's log on the shared root last grew: a hung collective writes nothing."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from state.records import driver_log


def log_changed_at(roots: Mapping[str, str], runs: Iterable[tuple[str, str]]) -> dict[str, float]:
    """Submission id -> mtime of its driver.log, for (cluster, submission id) pairs; one stat each.
    A run without a log on NFS is left out: it has not been seen writing, so it cannot be seen stop."""
    found = {}
    for cluster, submission_id in runs:
        if cluster not in roots:
            continue
        path = driver_log(roots[cluster], submission_id)
        if path is None:
            continue
        try:
            found[submission_id] = os.lstat(path).st_mtime
        except OSError:
            continue
    return found
