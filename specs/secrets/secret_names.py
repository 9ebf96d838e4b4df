"""Which variable names may carry a secret: the run's wrapper sources them in its own shell.

A secret reaches its run through `.secrets.env`, which the wrapper (a POSIX sh) sources before the
command starts (state.runs.secrets). Set in that shell, some names do harm a plain variable of Ray's
runtime_env never could; they are refused at file:line when the spec is loaded, and again when the
file is written.
"""

from __future__ import annotations

import re

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
WRAPPER_NAMES = frozenset("dctvpsrwgk")
"""The wrapper's own variables (reconcile.execute.wrapper)."""
SHELL_NAMES = frozenset({"IFS", "PS1", "PS2", "PS4", "ENV", "OPTIND", "OPTARG", "LINENO", "PPID", "UID", "EUID",
                         "SHELLOPTS", "BASHOPTS"})
"""Names a shell gives a meaning of its own. A shell resets them when it starts, so as plain variables they
are harmless; set while the wrapper runs they are not: IFS splits its pids and exit code, and where sh is
bash, setting a readonly one (UID, PPID, BASH_VERSINFO) ends the wrapper before the command and exit.json."""
RULE = (f"a variable that takes a secret (`${{env:NAME}}`) must be named with letters, digits and _, and not "
        f"one letter of {''.join(sorted(WRAPPER_NAMES))} (the run's wrapper uses those) nor a name the shell "
        f"gives a meaning ({', '.join(sorted(SHELL_NAMES))}, BASH_*): rename it")


def allowed(name: str) -> bool:
    return (bool(_NAME.fullmatch(name)) and name not in WRAPPER_NAMES and name not in SHELL_NAMES
            and not name.startswith("BASH_"))
