"""What a verl launch script would run, found without running any of its commands.

The script is read by bash itself (its expansions are bash's: arrays, `${VAR:-default}`, `$((...))`, `$@`,
quoting, line continuations), but in a shell that can run nothing: `env -i` (no inherited variables, so
no secret of the caller's environment can reach the spec), HOME a stand-in, PATH a folder that does not
exist, restricted mode (`set -r`: no command named with a `/`, no output redirection, no `cd`, no `exec`,
no changing PATH), the builtins that act outside the shell (`source`, `kill`, `trap`, ...) disabled, in an
empty folder, stdin empty, killed after a few seconds. Every command then reaches bash's
`command_not_found_handle`, which only prints a record of it (name, line, arguments, the exported
variables at that moment) and forwards what is piped into it, so `python3 ... | tee log` is still seen.

A value the script takes from a command's output (`$(nvidia-smi -L | wc -l)`) is not known: the record
that took its place is reported as the command that was not run.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field

TIMEOUT = 5.0
"""Seconds the evaluation may take: assignments and expansions take milliseconds."""
MAX_OUTPUT = 8 * 1024 * 1024
DISABLED = ("source", ".", "kill", "trap", "ulimit", "umask", "wait", "suspend", "disown", "fc", "history",
            "enable", "exec", "builtin", "command", "hash", "mapfile", "readarray", "coproc")
"""Builtins that reach outside the shell or wait on something; disabled, each becomes a command not run.
(`enable` last of all: nothing can be enabled again; restricted mode forbids it anyway.)"""
SEP, REC, INNER_SEP, INNER = "\x1f", "\x1e", "\x1c", "\x1d"
"""Fields, records, and records inside a value (a command substitution's): kept apart so they nest."""


@dataclass(frozen=True)
class Call:
    """One command the script would have run (env: only of those at the top, not in a `$(...)`)."""

    line: int
    argv: tuple[str, ...]
    env: dict[str, str]
    """The variables exported at that moment (besides the evaluator's own)."""
    nested: bool
    """Inside a command substitution or subshell: its output was wanted, and is not known."""


@dataclass
class Evaluated:
    calls: list[Call] = field(default_factory=list)
    home: str = ""
    """The stand-in for $HOME: a path under it was under the user's home directory."""
    workdir: str = ""
    """The stand-in for $PWD."""
    error: str | None = None
    """Why the evaluation stopped early (the script's `set -e`/`set -u` ending it, a timeout)."""
    marker: str = ""


def evaluate(text: str, args: list[str], variables: dict[str, str] | None = None) -> Evaluated:
    """The commands `text` would run with positional arguments `args` and `variables` in its environment (as
    `NAME=VALUE bash FILE ARGS` would), none of them run."""
    marker = secrets.token_hex(8)
    home = f"/argus-import-home-{marker}"
    with tempfile.TemporaryDirectory(prefix="argus-import-") as empty:
        script = _prelude(marker) + "\n" + text
        env = {**(variables or {}), "PATH": f"/argus-import-no-commands-{marker}", "HOME": home, "LANG": "C.UTF-8"}
        proc = subprocess.Popen(["/bin/bash", "--noprofile", "--norc", "-c", script, "script", *args],
                                cwd=empty, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            return Evaluated(_calls(out, marker), home, empty, f"stopped after {TIMEOUT:g} s", marker)
        stop = _stopped(err.decode(errors="replace"), proc.returncode)
        return Evaluated(_calls(out[:MAX_OUTPUT], marker), home, os.path.realpath(empty), stop, marker)


def nested_record(value: str, marker: str) -> str | None:
    """The command whose record stands in `value` in place of its output (`$(cmd)`), or None."""
    found = re.search(f"[{REC}{INNER}]{marker}[{SEP}{INNER_SEP}](.*?)[{REC}{INNER}]{marker}/", value, re.S)
    if found is None:
        return None
    fields = re.split(f"[{SEP}{INNER_SEP}]", found.group(1))
    return " ".join(fields[2:fields.index("--env")] if "--env" in fields else fields[2:])


def _prelude(marker: str) -> str:
    """One line (so the script's line N is bash's N+1): the handler, the disabled builtins, restricted mode.
    The handler forwards what is piped into it, then prints its record; separators inside a value (a record
    a command substitution captured) are swapped for their inner twins, so records nest."""
    begin, end = f"{REC}{marker}{SEP}", f"{REC}{marker}/"
    inner = "__a=${__a//$'\\x1e'/$'\\x1d'}; __a=${__a//$'\\x1f'/$'\\x1c'}"
    handler = "; ".join([
        "command_not_found_handle() { set +x", "local __l __a __n",
        "while IFS= read -r -d '' __l; do printf '%s\\0' \"$__l\"; done", "[ -n \"$__l\" ] && printf '%s' \"$__l\"",
        f"printf '{begin}%s{SEP}%s' \"$BASH_SUBSHELL\" \"${{BASH_LINENO[0]}}\"",
        f"for __a in \"$@\"; do {inner}; printf '{SEP}%s' \"$__a\"; done", f"printf '{SEP}--env'",
        f"[ \"$BASH_SUBSHELL\" = 0 ] && for __n in $(compgen -e); do __a=\"${{!__n}}\"; {inner}",
        f"printf '{SEP}%s=%s' \"$__n\" \"$__a\"; done",
        f"printf '{end}\\n'", "return 0; }",
    ])
    return f"{handler}; enable -n {' '.join(DISABLED)}; set -r; "


def _calls(out: bytes, marker: str) -> list[Call]:
    text = out.decode(errors="replace")
    calls = []
    for found in re.finditer(f"{REC}{marker}{SEP}(.*?){REC}{marker}/", text, re.S):
        fields = found.group(1).split(SEP)
        at = fields.index("--env") if "--env" in fields else len(fields)
        env = dict(item.split("=", 1) for item in fields[at + 1:] if "=" in item)
        calls.append(Call(max(int(fields[1] or 1) - 1, 0), tuple(fields[2:at]), env, fields[0] != "0"))
    return calls


def _stopped(err: str, code: int) -> str | None:
    if code == 0:
        return None
    lines = [line for line in err.splitlines() if not line.startswith("+") and line.strip()]
    return f"the script stopped (exit {code}): {lines[-1] if lines else 'no message'}"
