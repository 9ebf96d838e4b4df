"""One active `argus serve` per workspace: a lease file on the shared root, renewed every turn.

<shared_root>/.argus/serve/<workspace>.lease names the holder and when it last renewed. A standby
never trusts the holder's clock: it takes over when the lease it sees has not changed for `ttl`
seconds of its own clock (as Kubernetes' leader election does), so skewed hosts cannot steal a
live lease. Two standbys racing for a dead lease may both believe they won for one turn; the next
renewal settles it, and the apply lock plus deterministic submission ids keep that turn harmless.

Any job can write the lease file. With ARGUS_ROOT_KEY set the lease carries an HMAC (state.root_key):
a lease without a valid one counts as alive for our own ttl from when we first saw it, whatever it
says or how often it changes, so a forged lease delays a standby by one ttl at most; and a signed
lease is renewed only when its `renewed_epoch` goes forward, so replaying old genuine leases does not
keep a dead holder alive. Without the key a forger can keep a standby waiting by rewriting the file
(docs/serve.md says so), but a claimed ttl or renewal time cannot hold it forever on its own.
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
from state.root_key import keyed, sign, verify
from state.runs.records import now

SIGNED_AS = "serve-lease"
MAX_TTL = 3600.0
"""A holder's claimed ttl is taken up to this (seconds, an interval of half an hour): unsigned, a forged
ttl would otherwise hold a standby for ever."""
CLOCK_SKEW = 300.0
"""A renewal further in the future than this, seen by a one-turn process, is a forged one."""
UNSIGNED = "(a lease without a valid ARGUS_ROOT_KEY signature)"

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
    _newest: dict[str, float] = field(default_factory=dict)
    """Per holder, its newest signed renewal seen (`renewed_epoch`): an older lease replayed is no renewal."""
    _forged_since: float | None = None
    """When we first saw, without a valid lease in between, a lease whose signature is not valid."""
    _notices: list[str] = field(default_factory=list)
    _noticed: bool = False

    @property
    def path(self) -> Path:
        return lease_path(self.shared_root, self.workspace)

    @property
    def _rel(self) -> str:
        return f".argus/serve/{self.workspace}.lease"

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
                 "renewed_epoch": time.time(), "nonce": uuid.uuid4().hex, "ttl": self.ttl}
        signature = sign(SIGNED_AS, self.workspace, lease)
        write_beneath(self.shared_root, self._rel, json.dumps(
            lease if signature is None else {**lease, "sig": signature}, indent=2, sort_keys=True) + "\n")
        mine = self._read()
        return mine is not None and mine.get("holder") == self.holder

    def holder_now(self) -> str | None:
        current = self._read()
        return None if current is None else str(current.get("holder"))

    def release(self) -> None:
        current = self._read()
        if current is not None and current.get("holder") == self.holder:
            unlink_beneath(self.shared_root, self._rel)

    def notices(self) -> list[str]:
        """What an operator should hear about the lease file (a forgery), each once per process."""
        found, self._notices = self._notices, []
        return found

    def _alive(self, current: dict) -> bool:
        """Changed since we last looked (renewed), or unchanged for less than the longer of our ttl and
        the holder's own (a loop with a longer interval renews less often) on our own clock. A process
        that looks only once (`--once`) cannot watch: it reads the holder's renewal time instead,
        allowing the holder's ttl again for clock skew."""
        if current.get("holder") == UNSIGNED:
            return self._forged_alive()
        self._forged_since = None
        if _gone_here(current):
            return False
        ttl = max(self.ttl, min(_number(current.get("ttl")), MAX_TTL))
        if self.once:
            renewed = _epoch(current.get("renewed_at"))
            return renewed is None or -CLOCK_SKEW < time.time() - renewed < 2 * ttl
        if keyed():  # signed: a renewal is a newer renewal time, never an older lease put back
            holder, renewed_epoch = str(current.get("holder")), _number(current.get("renewed_epoch"))
            if renewed_epoch > self._newest.get(holder, float("-inf")):
                self._newest[holder], self._seen_since = renewed_epoch, time.monotonic()
                return True
            return time.monotonic() - self._seen_since < ttl
        text = json.dumps(current, sort_keys=True)
        if text != self._seen:
            self._seen, self._seen_since = text, time.monotonic()
            return True
        return time.monotonic() - self._seen_since < ttl

    def _forged_alive(self) -> bool:
        """A lease we cannot trust is waited out once, for our own ttl, however often it changes."""
        if self._forged_since is None:
            self._forged_since = time.monotonic()
        if self.once:
            return False
        return time.monotonic() - self._forged_since < self.ttl

    def _read(self) -> dict | None:
        """The lease as written; with a key set, one without a valid signature reads as UNSIGNED."""
        try:
            raw = read_regular(self.shared_root, self._rel, MAX_LEASE_BYTES)
        except OSError:  # a FIFO, a link, a huge file: refused unread
            return self._unsigned("it is not a regular file argus can read") if keyed() \
                else {"holder": "(unreadable lease)"}
        if raw is None:
            return None
        try:
            lease = json.loads(raw)
        except (ValueError, RecursionError):
            lease = None
        if not isinstance(lease, dict):
            return self._unsigned("it is not a lease argus wrote") if keyed() else {"holder": "(unreadable lease)"}
        if not keyed():
            return lease  # a torn or hostile file ("unreadable") is waited out like a live one
        fields = {k: v for k, v in lease.items() if k != "sig"}
        if not verify(SIGNED_AS, self.workspace, fields, lease.get("sig")):
            return self._unsigned("its ARGUS_ROOT_KEY signature is missing or wrong")
        return fields

    def _unsigned(self, why: str) -> dict:
        notice = (f"argus serve: ignoring the lease at {self.path}: {why} (forged by a job, or written by an "
                  "`argus serve` without this ARGUS_ROOT_KEY); taking over once it has stood for one lease time")
        if not self._noticed:  # once: a forger rewriting the file is one story, not one line a turn
            self._noticed = True
            self._notices.append(notice)
        return {"holder": UNSIGNED}


def _gone_here(current: dict) -> bool:
    """The lease names a holder on this very host whose process is not an argus that runs: a loop that died
    here, or a lease a job wrote naming this host (any pid). Told without a key; a holder on another host is
    not (only ARGUS_ROOT_KEY tells its lease from a forgery)."""
    pid = current.get("pid")
    if current.get("host") != socket.gethostname() or not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    if pid == os.getpid():
        return False  # another loop of this very process (argus serve A B): alive
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return not _exists(pid)  # no /proc here: only whether the process exists can be told
    return not any(word in command for word in (b"argus", b"reconcile"))


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it exists, another user's
        return True
    return True


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _epoch(value: object) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
