"""How a run gets its `${env:NAME}` values without Ray ever holding them.

Anything in a job's `runtime_env` is kept in Ray's job table (the dashboard shows it to whoever reaches
it), copied into the GCS job config and logged by the runtime-env agent on every node. So the values go
another way: just before the submit, argus writes them to `<shared_root>/jobs/<submission_id>/.secrets.env`,
mode 0600 (readable only by the user argus and the run share), and the run's wrapper
(reconcile.execute.wrapper) reads it into the driver's environment and removes it before the command
starts. Ray gets only the names of the variables that are not secret.

Defence in depth: the loader already refuses a `${env:NAME}` naming a variable argus holds for itself
(specs.kinds.held_variables) or one the workspace's `secrets:` does not list. This file is the last place a value
passes before a job can read it, so it refuses, again, any value that is the value of such a variable in
argus's environment, however the reference that asked for it was written.

A retry is a new submission with its own directory: the apply (or `argus serve`) that submits it writes
its file again, from the values in its own environment. A file left behind by a run that never started
(refused, stopped while pending, a runtime env that failed) is removed once its run has ended.
"""

from __future__ import annotations

import contextlib
import os
import shlex
from collections.abc import Mapping
from pathlib import Path

from specs.kinds import held_variables
from specs.secrets import secret_names
from specs.secrets.secret_names import allowed
from state.files import replace_in

SECRETS_FILE = ".secrets.env"
"""The name the wrapper looks for in its job directory: keep the two in step."""
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def write(job_dir: Path, values: dict[str, str], environ: Mapping[str, str] | None = None) -> None:
    """The file the wrapper sources: `export NAME='value'` lines, written whole (temp file, then rename)
    through the job directory opened without following links, so a link planted in a shared directory
    redirects nothing. Names are checked here too: the wrapper's shell runs this file. Nothing is written
    when a value is one argus holds for itself in `environ` (default: this process's environment)."""
    bad = sorted(name for name in values if not allowed(name))
    if bad:
        raise ValueError(f"{secret_names.RULE}: {', '.join(map(repr, bad))}")
    held = argus_values(values, os.environ if environ is None else environ)
    if held:
        raise ValueError(f"{', '.join(sorted(held))} would receive the value of {', '.join(sorted(set(held.values())))}"
                         f", a variable argus holds for itself and never hands to a job (specs.kinds.held_variables)")
    text = "".join(f"export {name}={shlex.quote(value)}\n" for name, value in sorted(values.items()))
    directory = os.open(job_dir, _DIRECTORY)
    try:
        _write_private(directory, text)
    finally:
        os.close(directory)


def argus_values(values: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """Each key of `values` whose value is that of a variable argus holds in `environ`, with that variable's
    name (never the value: this goes into an error)."""
    held = {value: name for name, value in environ.items() if value and held_variables.held(name)}
    return {key: held[value] for key, value in values.items() if value in held}


def remove(job_dir: Path) -> None:
    """Gone, if it is there: a run that has ended needs its secrets no more."""
    with contextlib.suppress(OSError):
        directory = os.open(job_dir, _DIRECTORY)
        try:
            os.unlink(SECRETS_FILE, dir_fd=directory)
        finally:
            os.close(directory)


def _write_private(directory: int, text: str) -> None:
    # bytes as os.environ holds them (not UTF-8 stays as it was); a new file made 0600, whatever the umask
    replace_in(directory, SECRETS_FILE, os.fsencode(text), mode=0o600)
