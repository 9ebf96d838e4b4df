"""One active `argus serve` per workspace: a lease file on the shared root, renewed every turn.

<shared_root>/.argus/serve/<workspace>.lease names the holder and when it last renewed. A standby
never trusts the holder's clock: it takes over when the lease it sees has not changed for `ttl`
seconds of its own clock (as Kubernetes' leader election does), so skewed hosts cannot steal a
live lease. Two standbys racing for a dead lease may both believe they won for one turn; the next
renewal settles it, and the apply lock plus deterministic submission ids keep that turn harmless.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from state.beneath import read_regular, unlink_beneath
from state.files import write_beneath
from state.records import now

MAX_LEASE_BYTES = 4096
"""A lease is a few hundred bytes of JSON."""


def lease_path(shared_root: str, workspace: str) -> Path:
    return Path(shared_root) / ".argus" / "serve" / f"{workspace}.lease"


@dataclass
class Lease:
    """This process's side of the lease: who it is, and what it last saw of the file."""

    shared_root: str
    workspace: str
    ttl: float
    holder: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}")
    once: bool = False
    """A process that makes one turn and exits: it judges the lease by its renewal time."""
    _seen: str | None = None
    _seen_since: float = 0.0

    @property
    def path(self) -> Path:
        return lease_path(self.shared_root, self.workspace)

    def try_hold(self) -> bool:
        """Renew the lease if it is ours, take it if it is free or dead; False while another holds it.
        Raises OSError when the shared root is not there (an NFS mount that is down is never created)."""
        if not (Path(self.shared_root) / ".argus").is_dir():  # an empty mount point is no shared root
            raise FileNotFoundError(f"shared root {self.shared_root} has no .argus directory: it is not mounted "
                                    "here, or nothing was ever applied to it (run `argus apply` once)")
        current = self._read()
        if current is not None and current.get("holder") != self.holder and self._alive(current):
            return False
        lease = {"holder": self.holder, "host": socket.gethostname(), "pid": os.getpid(), "renewed_at": now(),
                 "nonce": uuid.uuid4().hex, "ttl": self.ttl}
        write_beneath(self.shared_root, f".argus/serve/{self.workspace}.lease",
                      json.dumps(lease, indent=2, sort_keys=True) + "\n")
        mine = self._read()
        return mine is not None and mine.get("holder") == self.holder

    def holder_now(self) -> str | None:
        current = self._read()
        return None if current is None else str(current.get("holder"))

    def release(self) -> None:
        current = self._read()
        if current is not None and current.get("holder") == self.holder:
            unlink_beneath(self.shared_root, f".argus/serve/{self.workspace}.lease")

    def _alive(self, current: dict) -> bool:
        """Changed since we last looked (renewed), or unchanged for less than the longer of our ttl and
        the holder's own (a loop with a longer interval renews less often) on our own clock. A process
        that looks only once (`--once`) cannot watch: it reads the holder's renewal time instead,
        allowing the holder's ttl again for clock skew."""
        ttl = max(self.ttl, _number(current.get("ttl")))
        if self.once:
            renewed = _epoch(current.get("renewed_at"))
            return renewed is None or time.time() - renewed < 2 * ttl
        text = json.dumps(current, sort_keys=True)
        if text != self._seen:
            self._seen, self._seen_since = text, time.monotonic()
            return True
        return time.monotonic() - self._seen_since < ttl

    def _read(self) -> dict | None:
        try:
            raw = read_regular(self.shared_root, f".argus/serve/{self.workspace}.lease", MAX_LEASE_BYTES)
            if raw is None:
                return None
            data = json.loads(raw)
        except (OSError, ValueError, RecursionError):
            # a torn or hostile file (a FIFO, a link, a huge one: refused unread): waited out like a live one
            return {"holder": "(unreadable lease)"}
        return data if isinstance(data, dict) else {"holder": "(unreadable lease)"}


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _epoch(value: object) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
