"""What a job may read from argus's environment: the variables its Workspace lists in `secrets:`.

A `${env:NAME}` in a job's `env` (or in its cluster's `job_defaults.env`, merged under it) hands the value
of NAME in argus's environment to the run. That environment is the machine's: a CI runner's, a serve
host's, with credentials no job should see. So which variables jobs may read is declared once, on the
Workspace in argus.yaml, where reviewers see each one; a reference to any other is an error at its line.
(Variables argus holds for itself are refused even there: specs.kinds.held_variables.)
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

from specs.address import Address
from specs.desired import Source
from specs.diagnostics import Diagnostic
from specs.kinds.inputs import Dataset, Model
from specs.kinds.models import SECRET_REF_PATTERN, Cluster, Job, Workspace
from specs.parse.reading import WORKSPACE_FILE


def diagnostics(workspace: Workspace, clusters: Mapping[str, Cluster], jobs: Mapping[str, Job],
                sources: Mapping[str, Source], inputs: Mapping[str, Dataset | Model] | None = None) -> list[Diagnostic]:
    """An error at each `${env:NAME}` whose NAME the workspace's `secrets:` does not list (an FTP source's password
    is one too: its fetch run receives it)."""
    allowed = set(workspace.secrets)
    found = []
    for address, field, name in [*references(clusters, jobs), *_passwords(inputs or {})]:
        if name not in allowed:
            found.append(Diagnostic(severity="error", address=address, field=field,
                                    message=f"`${{env:{name}}}` names a variable the workspace does not let its "
                                            f"jobs read", hint=how_to_allow(name, workspace.secrets))
                         .located(sources[address]))
    return found


def references(clusters: Mapping[str, Cluster], jobs: Mapping[str, Job]) -> Iterator[tuple[str, str, str]]:
    """(address, field, NAME) of every `${env:NAME}` in job_defaults.env and in jobs' env."""
    for name, cluster in clusters.items():
        yield from _in(Address.cluster(name), "job_defaults.env", cluster.job_defaults.env)
    for name, job in jobs.items():
        yield from _in(Address.job(name), "env", job.env)


def _passwords(inputs: Mapping[str, Dataset | Model]) -> Iterator[tuple[str, str, str]]:
    for address, spec in sorted(inputs.items()):
        name = spec.ftp.password_variable if spec.ftp is not None else None
        if name is not None:
            yield address, "ftp.password", name


def how_to_allow(name: str, listed: list[str]) -> str:
    shown = ", ".join([*listed, name])
    return (f"if its jobs are to receive {name}, add it to the Workspace's list in {WORKSPACE_FILE} "
            f"(`secrets: [{shown}]`), where reviewers see every variable of argus's environment that jobs read")


def _in(address: str, field: str, env: Mapping[str, str]) -> Iterator[tuple[str, str, str]]:
    for key, value in env.items():
        match = re.match(SECRET_REF_PATTERN, value)
        if match:
            yield address, f"{field}.{key}", match.group(1)
