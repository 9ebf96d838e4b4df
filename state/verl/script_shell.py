"""What a verl launch script would run, found without running any of its commands.

The script is read by bash itself (its expansions are bash's: arrays, `${VAR:-default}`, `$((...))`, `$@`,
quoting, line continuations), but in a shell that can run nothing and read nothing of this machine:
- a root of its own: a user, mount and PID namespace (unshare) whose root holds only /usr, read-only (bash
  and its libraries), and /dev/null: no /etc, /home, /proc, /tmp, shared root or checkout to read, and every
  process it starts dies with it;
- `env -i` (no inherited variables: no secret of the caller's environment reaches the spec), HOME a stand-in,
  PATH a folder that does not exist and read-only (as are the variables bash runs code from), restricted
  mode (`set -r`: no command named with a `/`, no output redirection, no `cd`, no `exec`), globs kept as
  written, the builtins that act outside the shell (`source`, `kill`, `trap`, `enable`, ...) disabled;
- stdin empty, limits on CPU, memory and output, killed (with whatever it left behind) after a few seconds.
Every command then reaches bash's `command_not_found_handle` (read-only too), which only prints a record of
it (name, line, arguments, the exported variables at that moment) and forwards what is piped into it, so
`python3 ... | tee log` is still seen. Where the kernel allows no user namespace, the sandbox is skipped and
the import says that the files a script names were readable.

A value the script takes from a command's output (`$(nvidia-smi -L | wc -l)`) is not known: the record
that took its place is reported as the command that was not run.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import resource
import secrets
import shlex
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field
from typing import IO, Any

TIMEOUT = 5.0
"""Seconds the evaluation may take: assignments and expansions take milliseconds."""
MAX_OUTPUT = 8 * 1024 * 1024
MAX_MEMORY = 128 * 1024 * 1024
"""Per process; bash reading a launch script takes a few MB."""
MAX_PROCESSES = 32
"""Subshells and pipelines the evaluation may run at once: a fork bomb stops here."""
NOBODY = 65534
DISABLED = ("source", ".", "kill", "trap", "ulimit", "umask", "wait", "suspend", "disown", "fc", "history",
            "enable", "exec", "builtin", "command", "hash", "mapfile", "readarray", "coproc")
"""Builtins that reach outside the shell or wait on something; disabled, each becomes a command not run.
(`enable` last of all: nothing can be enabled again; restricted mode forbids it anyway.)"""
READ_ONLY = ("PATH", "SHELL", "ENV", "BASH_ENV", "HISTFILE", "BASH_XTRACEFD", "PS4", "PROMPT_COMMAND", "GLOBIGNORE",
             "BASH_LOADABLES_PATH", "EXECIGNORE")
"""Variables that choose what runs, or where bash writes; frozen before the script's first line."""
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
    sandboxed: bool = True
    """Whether the shell ran in a root of its own (see SANDBOX_SETUP); without it, files it names were readable."""


def evaluate(text: str, args: list[str], variables: dict[str, str] | None = None) -> Evaluated:
    """The commands `text` would run with positional arguments `args` and `variables` in its environment (as
    `NAME=VALUE bash FILE ARGS` would), none of them run."""
    marker = secrets.token_hex(8)
    home = f"/argus-import-home-{marker}"
    env = {**(variables or {}), "PATH": f"/argus-import-no-commands-{marker}", "HOME": home, "LANG": "C.UTF-8"}
    with tempfile.TemporaryDirectory(prefix="argus-import-") as empty, tempfile.TemporaryFile() as out, \
            tempfile.TemporaryFile() as err:
        sandboxed = sandbox_works()
        workdir = SANDBOX_WORKDIR if sandboxed else os.path.realpath(empty)
        script = _prelude(marker, workdir) + "\n" + text
        bash = ["/bin/bash", "--noprofile", "--norc", "-c", script, "script", *args]
        command = [*_sandbox(), *bash] if sandboxed else bash
        os.chmod(empty, 0o755)  # the shell may run as nobody (_unprivileged)
        code = _run(command, env, "/" if sandboxed else empty, out, err)
        out.seek(0)
        err.seek(0)
        calls = _calls(out.read(MAX_OUTPUT), marker)
        stop = f"stopped after {TIMEOUT:g} s" if code is None else \
            _stopped(err.read(MAX_OUTPUT).decode(errors="replace"), code)
        return Evaluated(calls, home, workdir, stop, marker, sandboxed)


def _run(command: list[str], env: dict[str, str], cwd: str, out: IO[bytes], err: IO[bytes]) -> int | None:
    """The evaluation's exit code (None: out of time), run with its limits; the whole process group is killed
    when it ends, whatever it left behind (a `... &` in the background outlives its shell otherwise)."""
    proc = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                            start_new_session=True, **_unprivileged())
    try:
        return proc.wait(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return None
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _unprivileged() -> dict[str, Any]:
    """How the evaluation is started: as `nobody` when argus runs as root (the kernel exempts root from a cap on
    processes, and root could read any file the sandbox failed to hide), with its limits (_limits)."""
    if os.geteuid() != 0:
        return {"preexec_fn": functools.partial(_limits, _own_processes() + MAX_PROCESSES)}
    return {"user": NOBODY, "group": NOBODY, "extra_groups": [], "preexec_fn": functools.partial(_limits,
                                                                                                  MAX_PROCESSES)}


def _limits(processes: int) -> None:
    """In the child, before bash: CPU seconds, memory and processes (a memory cap is per process: forked
    subshells each take their own), and the size of what it may print (its output goes to a file: past
    MAX_OUTPUT the kernel stops it with SIGXFSZ)."""
    resource.setrlimit(resource.RLIMIT_CPU, (int(TIMEOUT) + 1, int(TIMEOUT) + 1))
    resource.setrlimit(resource.RLIMIT_AS, (MAX_MEMORY, MAX_MEMORY))
    resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_OUTPUT, MAX_OUTPUT))
    resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))


def _own_processes() -> int:
    """This user's processes now: the cap on processes counts all of them, so the evaluation gets this many more."""
    uid = str(os.getuid())
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                count += os.stat(entry.path).st_uid == int(uid)
    return count


SANDBOX_WORKDIR = "/w"
SANDBOX_SETUP = """set -e
m=/usr/bin/mount
$m -t tmpfs -o size=256k,mode=755 argus-import /tmp
/usr/bin/mkdir -p /tmp/r/usr /tmp/r/dev /tmp/r/w
$m --bind /usr /tmp/r/usr
$m -o remount,bind,ro /tmp/r/usr
for l in bin lib lib32 lib64 libx32 sbin; do if [ -L /$l ]; then /usr/bin/ln -s "usr/$l" "/tmp/r/$l"; fi; done
/usr/bin/touch /tmp/r/dev/null
$m --bind /dev/null /tmp/r/dev/null
cd /
exec /usr/sbin/chroot /tmp/r "$@"
"""
"""A root of its own for the shell: /usr read-only (bash and its libraries) and /dev/null, nothing else: no
/etc, /home, /root, /proc, /tmp, no shared root, no checkout. Made in a user and mount namespace of its own
(unshare), and a PID namespace whose processes all die with it."""


def _sandbox() -> list[str]:
    return ["/usr/bin/unshare", "--user", "--map-root-user", "--mount", "--pid", "--fork", "--kill-child", "--",
            "/bin/sh", "-c", SANDBOX_SETUP, "sandbox"]


@functools.cache
def sandbox_works() -> bool:
    """Whether this machine lets an unprivileged process make the sandbox (user namespaces; most Linux
    kernels do): probed once. Without it the restricted shell alone keeps commands from running, and a
    script could read a file it names (the import then says so)."""
    if not all(os.path.exists(p) for p in ("/usr/bin/unshare", "/usr/bin/mount", "/usr/sbin/chroot", "/bin/sh")):
        return False
    try:
        done = subprocess.run([*_sandbox(), "/bin/bash", "--noprofile", "--norc", "-c", "[ ! -e /etc ]"],
                              env={"PATH": "/argus-import-no-commands"}, capture_output=True, timeout=TIMEOUT,
                              start_new_session=True, cwd="/", **_unprivileged())
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def nested_record(value: str, marker: str) -> str | None:
    """The command whose record stands in `value` in place of its output (`$(cmd)`), or None."""
    found = re.search(f"[{REC}{INNER}]{marker}[{SEP}{INNER_SEP}](.*?)[{REC}{INNER}]{marker}/", value, re.S)
    if found is None:
        return None
    fields = re.split(f"[{SEP}{INNER_SEP}]", found.group(1))
    return " ".join(fields[2:fields.index("--env")] if "--env" in fields else fields[2:])


def _prelude(marker: str, workdir: str) -> str:
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
    # PATH and the variables bash runs code from are read-only before anything of the script: `set -r` alone
    # leaves PATH writable (only a shell started restricted makes it read-only), and a script that sets PATH
    # would run real commands. Globs are kept as written (noglob): they would list directories.
    return (f"cd {shlex.quote(workdir)}; {handler}; readonly -f command_not_found_handle; "
            f"readonly {' '.join(READ_ONLY)}; enable -n {' '.join(DISABLED)}; set -f; set -r; ")


def _calls(out: bytes, marker: str) -> list[Call]:
    """The records the handler printed. A script can print what looks like one (it can read its own handler):
    a record that does not parse is skipped, never an error (what it could forge it could write as a launch)."""
    text = out.decode(errors="replace")
    calls = []
    for found in re.finditer(f"{REC}{marker}{SEP}(.*?){REC}{marker}/", text, re.S):
        fields = found.group(1).split(SEP)
        if len(fields) < 2 or not fields[1].isdigit() or len(fields[1]) > 9:
            continue
        at = fields.index("--env") if "--env" in fields else len(fields)
        env = dict(item.split("=", 1) for item in fields[at + 1:] if "=" in item)
        calls.append(Call(max(int(fields[1] or 1) - 1, 0), tuple(fields[2:at]), env, fields[0] != "0"))
    return calls


STOP_KINDS = (("syntax error", "a syntax error"), ("unbound variable", "an unset variable (set -u)"),
              ("readonly variable", "an assignment argus's shell does not allow (PATH and the like are read-only)"),
              ("restricted", "something argus's restricted shell does not allow"),
              ("bad substitution", "a bad substitution"), ("parameter null or not set", "a ${VAR:?} check"),
              ("error token is", "an arithmetic error"), ("division by 0", "an arithmetic error"),
              ("Resource temporarily unavailable", "too many processes"))
"""What stopped a script, in argus's words. bash's own message quotes the script (a whole line, for a syntax
error), and a script's line may hold a secret: none of it is shown."""


def _stopped(err: str, code: int) -> str | None:
    if code == 0:
        return None
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("+")]
    told = "\n".join(lines[-4:])
    at = re.findall(r"\bline (\d{1,9}):", told)
    where = f" at line {max(int(at[-1]) - 1, 1)}" if at else ""
    kind = next((said for found, said in STOP_KINDS if found in told), "an error (bash's message is not shown: it "
                                                                        "may quote the script)")
    return f"the script stopped (exit {code}){where}: {kind}"
