"""The probe's POSIX sh script, and the reading of what it reports.

Nothing of argus runs on the node: sh, cat, id, ls, date, rm. The script reads the file argus wrote
in the probe's directory (the worker sees argus's root), writes one back there (argus sees the
worker's), and tells, as the job's user, which of argus's own folders it could write: a file made
(O_EXCL, by `set -C`) and removed again, since access() says yes to root whatever the modes and NFS
may map users. It writes nothing where it did not find the probe's directory, so a node whose root is
not argus's, and a root whose probe argus gave up on (the probe started late), are left as they were.
Each fact is one line `argus-doctor: KEY=VALUE` on stdout, read back from Ray's copy of the driver log:
that copy reaches argus whether or not the root is shared.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

PREFIX = "argus-doctor: "
PROBE_DIR = ".argus/doctor"
"""Where argus makes each probe's directory (one per nonce), removed once the probe has ended."""
FROM_ARGUS, FROM_NODE = "from-argus", "from-node"
STATE_FOLDERS = (".", ".argus", ".argus/audit", ".argus/anchors", ".argus/runs", ".argus/queue", ".argus/locks",
                 ".argus/serve", ".argus/objects")
"""The root itself and argus's own state under it (docs/shared-root.md's table): a job that can write
there can make, garble or remove what argus keeps."""
MAX_REPORT_LINES = 100
"""Lines of the driver log read as the report: the script prints about twenty."""
_LINE = re.compile(r"^argus-doctor: ([a-z]+)(?: ([.a-z/]+))?=([\x21-\x7e]{0,200})$")

_SCRIPT = """
set -f; r={root}; d="$r/{probe_dir}/{nonce}"; say() {{ echo "argus-doctor: $1"; }};
say "uid=$(id -u)"; say "user=$(id -un 2>/dev/null || echo '?')"; say "clock=$(date +%s)";
if [ -f "$d/{from_argus}" ] && [ "$(cat "$d/{from_argus}" 2>/dev/null)" = {nonce} ];
  then say sees=yes; else say sees=no; fi;
if [ -d "$d" ] && printf '%s %s\\n' {nonce} "$(id -u)" > "$d/{from_node}" 2>/dev/null;
  then say wrote=yes; else say wrote=no; fi;
set -- $(ls -nd "$r/.argus" 2>/dev/null); say "owner=${{3:-?}}";
if [ -d "$d" ]; then for s in {folders}; do p="$r/$s"; t="$p/.argus-doctor-{nonce}";
  if [ ! -d "$p" ]; then w=absent; elif (set -C; umask 077; : > "$t") 2>/dev/null; then rm -f "$t"; w=yes;
  else w=no; fi; say "writable $s=$w"; done; fi;
say done=yes
"""


@dataclass(frozen=True)
class NodeReport:
    """What the probe said from its node; fields it did not say are None."""

    uid: str | None = None
    user: str | None = None
    clock: int | None = None
    """The node's clock (Unix seconds) while the probe ran."""
    sees: bool | None = None
    """The node found argus's file, nonce and all, under the root."""
    wrote: bool | None = None
    """The node wrote its answer beside argus's file."""
    owner: str | None = None
    """The uid that owns `.argus` as the node sees it (`?`: it could not tell)."""
    writable: dict[str, str] = field(default_factory=dict)
    """Folder (STATE_FOLDERS) -> yes, no or absent: whether the job's user could make a file in it."""
    done: bool = False
    """The script ran to its end."""


def probe_script(root: str, nonce: str) -> str:
    """The entrypoint Ray runs with /bin/sh -c: the script as one line, inside `sh -c` (POSIX sh whatever
    the node's /bin/sh runs it)."""
    if not re.fullmatch(r"[0-9a-f]{8,64}", nonce):
        raise ValueError(f"{nonce!r} is not a probe nonce")
    text = _SCRIPT.format(root=shlex.quote(root), probe_dir=PROBE_DIR, nonce=nonce, from_argus=FROM_ARGUS,
                          from_node=FROM_NODE, folders=" ".join(STATE_FOLDERS))
    one_line = " ".join(line.strip() for line in text.strip().splitlines())
    return f"sh -c {shlex.quote(one_line)}"


def parse_report(log: str) -> NodeReport:
    """The facts of the `argus-doctor:` lines of a driver log. The log is the cluster's to write (any job
    can reach the dashboard): a line of another shape, a value out of shape or a key said twice is not
    taken, the first saying wins."""
    said: dict[str, str] = {}
    writable: dict[str, str] = {}
    for line in log.splitlines()[:MAX_REPORT_LINES]:
        match = _LINE.match(line.rstrip("\r"))
        if match is None:
            continue
        key, folder, value = match.groups()
        if key == "writable" and folder in STATE_FOLDERS and value in ("yes", "no", "absent"):
            writable.setdefault(folder, value)
        elif folder is None:
            said.setdefault(key, value)
    return NodeReport(uid=_digits(said.get("uid")), user=said.get("user"), clock=_number(said.get("clock")),
                      sees=_yes(said.get("sees")), wrote=_yes(said.get("wrote")), owner=said.get("owner"),
                      writable=writable, done=said.get("done") == "yes")


def _yes(value: str | None) -> bool | None:
    return {"yes": True, "no": False}.get(value or "")


def _digits(value: str | None) -> str | None:
    return value if value is not None and value.isdigit() else None


def _number(value: str | None) -> int | None:
    return int(value) if value is not None and value.isdigit() and len(value) < 16 else None
