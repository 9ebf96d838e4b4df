"""`after:` between jobs of one workspace, and `${job:NAME.FIELD}` references to a predecessor's outputs.

Pure functions of the specs: which jobs a job follows and how, the order to plan them in, and the
located errors of a pipeline (unknown names, a job after itself, cycles, references to a job not in
`after:` or to a field argus does not know).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from functools import partial

from specs.address import Address
from specs.desired import Source
from specs.diagnostics import Diagnostic
from specs.kinds.models import Job
from specs.load import input_refs

SUCCEEDED, FINISHED = "succeeded", "finished"
FIELDS = ("checkpoint_dir", "submission_id")
"""What a follower may name of its predecessor: both derive from specs and ids, never from a record."""
REFERENCE = re.compile(r"\$\{job:([^}]*)\}")
WELL_FORMED = re.compile(r"([a-z0-9][a-z0-9-]{0,62})\.([a-z_]+)")
SAFE_VALUE = re.compile(r"[A-Za-z0-9_.,:/@+=-]+")
"""A bound value is pasted into a shell line: only characters that need no quoting (and `${shared_root}`)."""


def needs(job: Job) -> dict[str, str]:
    """Predecessor name -> `succeeded` or `finished`; a list means `succeeded` for each."""
    if job.after is None:
        return {}
    if isinstance(job.after, list):
        return dict.fromkeys(job.after, SUCCEEDED)
    return dict(job.after)


def placeholder(name: str, field: str) -> str:
    return f"${{job:{name}.{field}}}"


def referenced_texts(job: Job) -> Iterator[tuple[str, str]]:
    """(field path, text) of every place a reference may be: entrypoint, env values, overrides."""
    if isinstance(job.entrypoint, str):
        yield "entrypoint", job.entrypoint
    elif job.entrypoint:
        yield from ((f"entrypoint.{i}", arg) for i, arg in enumerate(job.entrypoint))
    yield from ((f"env.{key}", value) for key, value in job.env.items())
    yield from ((f"overrides.{i}", text) for i, text in enumerate(job.overrides))


def references(text: str) -> list[tuple[str, str]]:
    """(job, field) of each well-formed `${job:NAME.FIELD}` in `text`."""
    return [match.groups() for inner in REFERENCE.findall(text) if (match := WELL_FORMED.fullmatch(inner))]


def safe(value: str) -> bool:
    return bool(SAFE_VALUE.fullmatch(value.replace("${shared_root}", "")))


def fill(text: str, bindings: Mapping[str, str]) -> str:
    """Each bound placeholder replaced by its value (execute does it at submit, like `${submission_id}`)."""
    for key, value in bindings.items():
        text = text.replace(key, value)
    return text


def stand_ins(text: str) -> str:
    """Each reference replaced by a value of its shape, for checks made before the predecessor has run (Hydra
    would read `${job:...}` as its own interpolation)."""
    for name, field in references(text):
        value = f"/argus-stand-in/{name}/checkpoints" if field == "checkpoint_dir" else f"{name}-stand-in"
        text = text.replace(placeholder(name, field), value)
    return input_refs.stand_ins(text)  # `${dataset:...}` and `${model:...}` too: the callers check overrides


def in_order(jobs: Mapping[str, Job]) -> list[str]:
    """Every job after its predecessors, names sorted among equals; jobs of a cycle (an error the loader
    reports) come last, sorted, so planning still sees every job."""
    waiting = {name: {p for p in needs(job) if p in jobs and p != name} for name, job in jobs.items()}
    order: list[str] = []
    while ready := sorted(name for name, before in waiting.items() if not before):
        for name in ready:
            order.append(name)
            del waiting[name]
        for before in waiting.values():
            before.difference_update(ready)
    return order + sorted(waiting)


def pipeline_diagnostics(jobs: Mapping[str, Job], sources: Mapping[str, Source]) -> list[Diagnostic]:
    found: list[Diagnostic] = []
    for name, job in sorted(jobs.items()):
        at = partial(_error, Address.job(name), sources[Address.job(name)])
        follows = needs(job)
        for predecessor in follows:
            where = _after_field(job, predecessor)
            if predecessor == name:
                found.append(at(where, f"job {name!r} cannot run after itself", "remove it from `after:`"))
            elif predecessor not in jobs:
                known = ", ".join(sorted(set(jobs) - {name})) or "none defined"
                found.append(at(where, f"no Job named {predecessor!r} in this workspace (known: {known})",
                                "`after:` names jobs of the same workspace"))
        found += _reference_diagnostics(job, follows, jobs, at)
    return found + _cycles(jobs, sources)


def _reference_diagnostics(job: Job, follows: Mapping[str, str], jobs: Mapping[str, Job],
                           at: partial[Diagnostic]) -> list[Diagnostic]:
    found = []
    for path, text in referenced_texts(job):
        for inner in REFERENCE.findall(text):
            match = WELL_FORMED.fullmatch(inner)
            if match is None:
                found.append(at(path, f"`${{job:{inner}}}` is not a reference argus knows",
                                f"write `${{job:NAME.FIELD}}` with FIELD one of {', '.join(FIELDS)}"))
                continue
            other, field = match.groups()
            if field not in FIELDS:
                found.append(at(path, f"`{placeholder(other, field)}`: unknown field {field!r}",
                                f"use one of {', '.join(FIELDS)}"))
            elif other not in follows:
                found.append(at(path, f"`{placeholder(other, field)}` names job {other!r}, which is not in this "
                                      "job's `after:`", f"add {other} to `after:`: its output exists only once "
                                                        "its run has ended"))
            elif field == "checkpoint_dir" and other in jobs and jobs[other].cluster != job.cluster:
                found.append(at(path, f"`{placeholder(other, field)}` is on cluster {jobs[other].cluster!r}'s shared "
                                      f"root, which the nodes of {job.cluster!r} may not see",
                                "run both jobs on one cluster, or pass the path yourself"))
    return found


def _cycles(jobs: Mapping[str, Job], sources: Mapping[str, Source]) -> list[Diagnostic]:
    """One error per cycle, at the `after:` of its first job (by name), naming the whole cycle."""
    edges = {name: sorted(p for p in needs(job) if p in jobs and p != name) for name, job in jobs.items()}
    found, seen = [], set()
    for start in sorted(edges):
        path = _cycle_from(start, edges)
        if path is None or frozenset(path) in seen or min(path) != start:
            continue
        seen.add(frozenset(path))
        shown = " -> ".join([*path, start])
        found.append(_error(Address.job(start), sources[Address.job(start)], _after_field(jobs[start], path[1]),
                            f"`after:` makes a cycle: {shown} (each waits for the next, so none would ever start)",
                            "remove one of these names from `after:`"))
    return found


def _cycle_from(start: str, edges: Mapping[str, list[str]]) -> list[str] | None:
    """A path start -> ... that leads back to start, or None."""
    stack, visited = [(start, [start])], {start}
    while stack:
        node, path = stack.pop()
        for nxt in edges[node]:
            if nxt == start:
                return path
            if nxt not in visited:
                visited.add(nxt)
                stack.append((nxt, [*path, nxt]))
    return None


def _after_field(job: Job, predecessor: str) -> str:
    if isinstance(job.after, list):
        return f"after.{job.after.index(predecessor)}"
    return f"after.{predecessor}"


def _error(address: str, source: Source, field: str, message: str, hint: str | None = None) -> Diagnostic:
    return Diagnostic(severity="error", address=address, field=field, message=message, hint=hint).located(source)
