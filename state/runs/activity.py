"""When each running run's log on the shared root last grew: a hung collective writes nothing."""

from __future__ import annotations

import stat
from collections.abc import Iterable, Mapping

from state.beneath import stat_beneath
from state.runs.records import driver_log_rel


def log_changed_at(roots: Mapping[str, str], runs: Iterable[tuple[str, str]]) -> dict[str, float]:
    """Submission id -> mtime of its driver.log, for (cluster, submission id) pairs; one stat each.
    A run without a log on NFS (or whose log is no regular file beneath the root: a link a job planted)
    is left out: it has not been seen writing, so it cannot be seen stop."""
    found = {}
    for cluster, submission_id in runs:
        if cluster not in roots:
            continue
        info = stat_beneath(roots[cluster], driver_log_rel(submission_id))
        if info is not None and stat.S_ISREG(info.st_mode):
            found[submission_id] = info.st_mtime
    return found
