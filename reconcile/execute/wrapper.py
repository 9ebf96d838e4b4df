"""Every entrypoint runs inside a small POSIX sh wrapper, so a run writes its own record on NFS.

While the command lives, its stdout and stderr go through `tee` into
`<shared_root>/jobs/<submission_id>/logs/driver.log` (and on to Ray, which keeps the same text);
when it ends, `exit.json` says how: exit code, time, and the signal when one ended it. Both are
written by the run on its node, so they survive a head restart, Ray's table being pruned, and argus
not running at all. Nothing of argus is needed on the nodes: sh, mkdir, mktemp, mkfifo, tee, date, mv.

How it keeps the job's behaviour:
- The command runs in the foreground: a non-interactive sh would make a background command ignore
  SIGINT (`RAY_JOB_STOP_SIGNAL=SIGINT` must still reach it), and sh runs a trap only once its
  foreground command has ended, which is what we want: the wrapper notes the stop and waits.
- `ray job stop` signals the wrapper and every descendant (psutil's process tree); `tee` ignores
  the stop signals so the last lines still reach the log, and ends when the command's output closes.
  A `tee` held open by something the command left behind is ended after a few seconds.
- The wrapper exits with the command's own exit code.
- If the job directory cannot be written, the command runs unwrapped (Ray still has its log and end).
- The FIFO lives in a directory of its own from mktemp: one named by the wrapper's pid collided with
  what a SIGKILLed wrapper had left, and that later run went unrecorded.
- Before anything else, a run that has secrets (a third argument) reads them from `.secrets.env` in
  its job directory into its environment and removes the file (state.runs.secrets): the command's
  environment has them, Ray never had them. A file that is missing (a node without the shared root at
  the same path) or unreadable fails the run with a message saying why, rather than running without.
  A run without secrets never reads such a file, whoever put it there.
A wrapper SIGKILLed by Ray (a command that ignores SIGTERM for longer than RAY_JOB_STOP_WAIT_TIME_S)
writes no exit.json: Ray's STOPPED and argus's stop record tell that end.
"""

from __future__ import annotations

import shlex

_LINES = """
d=$1; c=$2; t=; v=$d/.secrets.env;
if [ -n "$3" ]; then
  if [ ! -e "$v" ] && [ ! -h "$v" ]; then
    c='echo "argus: this run has no .secrets.env in its job directory:
      the shared root must be at one path on every node" >&2; exit 1';
  elif [ -f "$v" ] && [ -r "$v" ] && . "$v"; then :; else
    c='echo "argus: this run cannot read its .secrets.env: argus and the job must be one user" >&2; exit 1';
  fi; rm -f "$v"; fi;
if mkdir -p "$d/logs" 2>/dev/null && t=$(mktemp -d "${TMPDIR:-/tmp}/argus-run.XXXXXX") && mkfifo "$t/out";
  then :; else [ -z "$t" ] || rm -rf "$t";
  echo "argus: cannot write $d: this run keeps no record of its own" >&2; exec /bin/sh -c "$c"; fi;
(trap "" INT TERM HUP; exec tee -a "$d/logs/driver.log") < "$t/out" & p=$!;
s=; trap "s=TERM" TERM; trap "s=INT" INT; trap "s=HUP" HUP;
/bin/sh -c "$c" > "$t/out" 2>&1; r=$?;
(sleep 5; kill -9 $p) </dev/null >/dev/null 2>&1 & w=$!; wait $p; kill $w 2>/dev/null; rm -rf "$t";
g=$s; if [ -z "$g" ] && [ $r -gt 128 ]; then g=$(kill -l $r 2>/dev/null); fi;
case "$g" in ""|*[!A-Z0-9]*) g=null;; *) g="\\"$g\\"";; esac;
if [ -n "$s" ]; then k=true; else k=false; fi;
printf "{\\"exit_code\\": %d, \\"signal\\": %s, \\"signalled\\": %s, \\"ended_at\\": \\"%s\\"}\\n" $r "$g" $k
  "$(date -u +%Y-%m-%dT%H:%M:%SZ)" > "$d/.exit.json.$$" && mv -f "$d/.exit.json.$$" "$d/exit.json";
exit $r
"""
SCRIPT = " ".join(line.strip() for line in _LINES.strip().splitlines())
"""One line, so `ray job list` shows it readably; $1 is the job directory, $2 the command, $3 (any
text) says the run has a secrets file to read."""


def wrapped(command: str, job_dir: str, has_secrets: bool = False) -> str:
    """The entrypoint Ray runs (with /bin/sh -c): `command` inside the recording wrapper."""
    entry = f"exec sh -c {shlex.quote(SCRIPT)} argus-run {shlex.quote(job_dir)} {shlex.quote(command)}"
    return f"{entry} secrets" if has_secrets else entry
