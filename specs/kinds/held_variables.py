"""Which environment variables argus holds for itself, so that no job may read them through `${env:NAME}`.

A job's `${env:NAME}` is read from argus's own environment at submit and handed to the run (the run's
`.secrets.env`, state.runs.secrets). That environment also holds argus's credentials: the keys that sign
what it writes on the shared root and seal saved plans, the dashboard's token, the git tokens, the
notification URLs (each with its service's token). A job that names one would receive it, and a job is
code a pull request wrote. So argus reads its own credentials only from names of the shapes below, and
a job may never name a variable of these shapes: the two sets of names are disjoint by construction,
whatever any workspace's specs say, and whatever another workspace served by the same process uses.

- `ARGUS_*`: argus's own variables (ARGUS_ROOT_KEY, ARGUS_PLAN_KEY, ARGUS_AUDIT_KEY: state.root_key's
  KEY_VARIABLES; ARGUS_NOTIFY, ARGUS_TOKEN_HOSTS, ...).
- `GIT_TOKEN_*`: the git tokens of `git: {token: ...}` (specs.kinds.git_urls), sent to one git host alone.
- RAY with TOKEN, HEADER or COOKIE in it: the only names a Cluster's auth_token, headers and cookies may
  read (specs.kinds.transport): whoever holds them holds the dashboard.
- NOTIFY or WEBHOOK in it: the only names a notification route's `to` may read (specs.kinds.notifications).

Names are compared without case: `argus_root_key` is another variable to the shell, but no reviewer
should have to tell the two apart.
"""

from __future__ import annotations

from specs.kinds.notifications import is_url_variable
from specs.kinds.transport import is_reference_variable

PREFIXES = ("ARGUS_", "GIT_TOKEN_")


def reason(name: str) -> str | None:
    """Why argus holds `name` for itself; None for a variable a job may be allowed to read."""
    upper = name.upper()
    if upper.startswith("ARGUS_"):
        return "argus's own variables (ARGUS_*: the keys of the shared root, the audit log and saved plans among them)"
    if upper.startswith("GIT_TOKEN_"):
        return "the git tokens argus fetches code snapshots with (GIT_TOKEN_*)"
    if is_reference_variable(name):
        return "the names argus reads a dashboard's token, headers and cookies from (RAY with TOKEN, HEADER or COOKIE)"
    if is_url_variable(name):
        return "the names argus serve reads notification URLs from (NOTIFY or WEBHOOK)"
    return None


def held(name: str) -> bool:
    return reason(name) is not None


def refusal(name: str) -> str:
    """The message for a spec that names a held variable: what it is, why never, what to do."""
    return (f"{name} is one of {reason(name)}: argus holds these for itself and never hands one to a job, which "
            f"would receive its value; export the value the job needs under another name (like "
            f"{suggested(name)}) and name that one")


def suggested(name: str) -> str:
    """A name of the same meaning that argus does not hold: for the error's example only."""
    candidate = "JOB_" + name.upper().removeprefix("ARGUS_").removeprefix("GIT_TOKEN_")
    for word, other in (("RAY", "CLUSTER"), ("NOTIFY", "ALERT"), ("WEBHOOK", "HOOK")):
        candidate = candidate.replace(word, other)
    return candidate if not held(candidate) else "JOB_SECRET"
