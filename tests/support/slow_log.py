"""A log whose write takes a while, as an fsync does: time for other callers of state.audit.group_commit to queue
behind it; it fails on a group carrying `fail_when`."""

from __future__ import annotations

import time


class SlowLog:
    def __init__(self, fail_when: str | None = None):
        self.groups: list[list[str]] = []
        self.fail_when = fail_when

    def write(self, items: list[str]) -> None:
        time.sleep(0.002)
        if self.fail_when in items:
            raise OSError(28, "No space left on device")
        self.groups.append(list(items))

    @property
    def written(self) -> list[str]:
        return [item for group in self.groups for item in group]
