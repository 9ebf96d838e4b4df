"""Human renderings of plans and status. Views take data and return text; they decide nothing."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import typer

from reconcile.model import Action, Change, FieldChange, Plan, RunView
from reconcile.views.argv import argv_lines, field_argv_diff
from reconcile.views.others import unmanaged_lines
from reconcile.views.run_progress import with_progress_column
from specs.diagnostics import Diagnostic, plain, printable
from state.observed import DEADLINE, RunStatus

_MARK_COLOURS = {"-": "red", "+": "green"}
STATUS_WIDTH = 100
"""Where `argus status` wraps a failed run's advice."""
EVIDENCE_SHOWN = 3
"""Log lines shown under a failed run; `status --format json` has all the record keeps."""


@dataclass(frozen=True)
class Unseen:
    """What `argus status` could not see: the clusters that did not answer, and the job rows they hide."""

    clusters: Mapping[str, str] = field(default_factory=dict)
    """Cluster name -> why it could not be read."""
    jobs: Mapping[str, str] = field(default_factory=dict)
    """Job address -> the unreachable cluster(s) it needs ("b", or "a, b"): its sync is unknown."""


def render_plan(plan: Plan, colour: bool = False, all_workspaces: bool = False) -> str:
    lines = [f"argus plan for workspace {plan.workspace!r}", ""]
    if plan.options.targets:  # --replace adds a new attempt to the whole plan, as Terraform's -replace does
        lines += [f"  Limited by {' '.join(f'--target {t}' for t in plan.options.targets)}: other changes may be "
                  "pending.", ""]
    for change in (*plan.actionable, *plan.drifted):
        lines.extend(_change_lines(change, colour))
    lines.extend(_waiting_lines(plan))
    for change in plan.following:  # what starts once its predecessors are done: reviewed now, like a submit
        lines.extend(_change_lines(change, colour))
    in_sync = [c for c in plan.changes if c.action is Action.NOOP]
    if in_sync:
        lines.append("  Unchanged:")
        lines.extend(f"    {c.address}: {c.reason}{deadline_note(c)}" for c in in_sync)
        lines.append("")
    lines.extend(unmanaged_lines(plan, all_workspaces, indent="  ") + ([""] if plan.unmanaged else []))
    lines.extend(_diagnostic_lines(plan.diagnostics, colour))
    lines.append(summary(plan))
    return "\n".join(lines)


def summary(plan: Plan) -> str:
    waiting = sum(c.action is Action.QUEUE for c in plan.changes)
    drifted = f" {len(plan.drifted)} run(s) drifted: stopped outside argus, left so." if plan.drifted else ""
    if not plan.actionable:
        if plan.errors:  # a cluster not read, a spec not checked: nothing here says the clusters match
            return f"No changes planned, and the desired state is not confirmed: fix the {len(plan.errors)} " \
                   f"error(s) above.{drifted}"
        if drifted:  # Terraform's "Objects have changed outside of Terraform": a difference, not a match
            return f"No changes to apply.{drifted}"
        if waiting:
            return f"No changes. {waiting} job(s) wait in the admission queue for room on their cluster."
        if plan.following:
            return f"No changes. {len(plan.following)} job(s) wait on their predecessors (after:)."
        if plan.options.targets:  # the rest was not looked at: nothing says it matches
            return "No changes for the targets."
        return "No changes. The clusters match the desired state."
    counts = plan.counts()
    shown = [a for a in (Action.CREATE, Action.UPDATE, Action.SUBMIT, Action.RETRY, Action.REPLACE, Action.STOP,
                         Action.DELETE)
             if counts[a] or a in (Action.SUBMIT, Action.REPLACE, Action.STOP)]
    queued = f", {waiting} queued" if waiting else ""
    queued += f", {counts[Action.DEADLINE]} to stop at max_runtime" if counts[Action.DEADLINE] else ""
    queued += f", {counts[Action.IDLE]} to stop as idle" if counts[Action.IDLE] else ""
    queued += f", {len(plan.following)} waiting on predecessors" if plan.following else ""
    return f"Plan: {', '.join(f'{counts[a]} to {a.value}' for a in shown)}{queued}.{drifted}"


def _waiting_lines(plan: Plan) -> list[str]:
    """Jobs already in the queue that still wait: nothing to do, but people need to see where they stand."""
    waiting = plan.waiting
    if not waiting:
        return []
    return ["  Waiting in the admission queue:", *(f"    {c.address}: {c.reason}" for c in waiting), ""]


def render_outcomes(rows: list[tuple[str, str, str]]) -> str:
    """The closing table of an apply: what was done to each address."""
    table = [("ADDRESS", "ACTION", "OUTCOME"), *rows]
    widths = [max(len(r[i]) for r in table) for i in range(2)]
    return "\n".join(f"  {r[0].ljust(widths[0])}  {r[1].ljust(widths[1])}  {r[2]}" for r in table)


def render_status(plan: Plan, desired_jobs: set[str], unseen: Unseen | None = None,
                  all_workspaces: bool = False, gpu: Mapping[str, str] | None = None) -> str:
    """`gpu`: by submission id, each active run's GPU use (reconcile.views.gpu.cells): a GPU column when given and
    a run is active."""
    unseen = unseen or Unseen()
    jobs = [c for c in sorted(plan.changes, key=lambda c: c.address) if c.address.startswith("job.")]
    gpu = gpu if gpu is not None and any(_active(c) for c in jobs) else None
    rows = [("JOB", "SYNC", "HEALTH", *gpu_head(gpu), "RUN")]
    rows += [(c.address, sync_of(c, desired_jobs, unseen), health_of(c, unseen) or "-", *gpu_cell(c, gpu),
              c.current.submission_id if c.current else "-") for c in jobs]
    rows = with_progress_column(rows, jobs)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    lines = []
    for row, change in zip(rows, [None, *jobs], strict=True):
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=True)) + "  " + row[-1])
        lines += (_failure_lines(change) + _queue_lines(change) + _deadline_lines(change) + _after_lines(change)
                  + _bound_lines(change)) if change else []
    if plan.unmanaged:  # other teams' runs summed up: a shared cluster keeps thousands (reconcile.views.others)
        lines += ["", *unmanaged_lines(plan, all_workspaces)]
    lines += _diagnostic_lines(plan.diagnostics, colour=False)
    return "\n".join(lines).rstrip()


def gpu_head(gpu: Mapping[str, str] | None) -> tuple[str, ...]:
    return ("GPU",) if gpu is not None else ()


def gpu_cell(change: Change, gpu: Mapping[str, str] | None) -> tuple[str, ...]:
    """A run argus found on Ray as active but whose GPU use was not read (its cluster's answer unknown): "unknown"."""
    if gpu is None:
        return ()
    return (gpu.get(change.current.submission_id, "unknown"),) if _active(change) else ("-",)


def _active(change: Change) -> bool:
    run = change.current
    return run is not None and run.on_ray and not run.finished


def shows_submission(change: Change) -> bool:
    """A new job's submit: with no previous run to diff against, the views show what it runs. A new
    job that must wait in the queue too: the apply that queues it is its only review, as `argus serve`
    submits it later without another plan."""
    wanted = change.queue.wanted if change.action is Action.QUEUE and change.queue else change.action
    wanted = Action.SUBMIT if change.action is Action.WAIT else wanted  # `argus serve` starts it once released
    return wanted is Action.SUBMIT and change.before is None and bool(change.after)


def sync_of(change: Change, desired_jobs: set[str], unseen: Unseen | None = None) -> str:
    """in sync: nothing to do; missing: never ran; removed: no spec; changed: anything else;
    unknown: its cluster did not answer, so nothing was decided."""
    if unseen and change.address in unseen.jobs:
        return "unknown"
    if change.address.removeprefix("job.") not in desired_jobs:
        return "removed"
    if change.action is Action.NOOP:
        return "in sync"
    if change.action is Action.QUEUE:
        return f"queued #{change.queue.position}" if change.queue else "queued"
    if change.action is Action.DRIFT:
        return "drifted"
    if change.action is Action.DEADLINE:
        return "past max_runtime"
    if change.action is Action.WAIT:
        return "blocked" if any(w.blocked for w in change.waiting_on) else "waiting"
    return "missing" if change.action is Action.SUBMIT and change.current is None else "changed"


def health_of(change: Change, unseen: Unseen | None = None) -> str | None:
    """The current run's health; for a job an unreachable cluster hides, which cluster, and the status
    argus last saw of its run."""
    hidden = unseen.jobs.get(change.address) if unseen else None
    if hidden is None:
        return change.current.health if change.current else None
    seen = f" (last seen {change.current.status})" if change.current else ""
    return f"cluster {hidden} unreachable{seen}"


def failed_run(change: Change) -> RunView | None:
    """The job's current run when it failed, was lost or was stopped at its max_runtime: the run status explains."""
    run = change.current
    at_deadline = run is not None and run.failure == DEADLINE and run.status is RunStatus.STOPPED
    return run if run is not None and (run.failed or at_deadline) else None


def _failure_lines(change: Change) -> list[str]:
    """Under a job whose run failed: the class, what to do, and the last log lines that made the class."""
    run = failed_run(change)
    if run is None or run.failure is None:
        return []
    lines = [f"    failure: {run.failure}"]
    lines += textwrap.wrap(run.advice or "", width=STATUS_WIDTH, initial_indent="    advice:  ",
                           subsequent_indent=" " * 13, break_long_words=False, break_on_hyphens=False)
    shown = run.evidence[-EVIDENCE_SHOWN:]
    lines += [f"    {'log:' if i == 0 else '':9}{printable(line)}" for i, line in enumerate(shown)]
    hidden = len(run.evidence) - len(shown)
    return lines + ([f"             ({hidden} earlier line(s): argus status --format json)"] if hidden else [])


def deadline_note(change: Change) -> str:
    """"; argus stops it at <time> (max_runtime)" for a job whose active run has a deadline."""
    return f"; argus stops it at {utc(change.deadline_at)} (max_runtime)" if change.deadline_at else ""


def utc(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _deadline_lines(change: Change) -> list[str]:
    """Under a job whose active run has a max_runtime: when argus stops it."""
    if not change.deadline_at:
        return []
    return [f"    deadline: {utc(change.deadline_at)} (max_runtime: argus stops the run then)"]


def _queue_lines(change: Change) -> list[str]:
    """Under a job that waits for room: why, and what it asks for."""
    if change.action is not Action.QUEUE or change.queue is None:
        return []
    return [f"    queued:  {change.reason}", f"    demand:  {change.queue.demand} (priority {change.queue.priority})"]


def _after_lines(change: Change) -> list[str]:
    """Under a job that waits on its predecessors: each one, its state, and why it blocks."""
    if change.action is not Action.WAIT:
        return []
    shown = [f"{w.job} to {'succeed' if w.needs == 'succeeded' else 'finish'} ({w.state}"
             f"{', ' + w.submission_id if w.submission_id else ''}{', blocked' if w.blocked else ''})"
             for w in change.waiting_on]
    why = textwrap.wrap(change.reason, width=STATUS_WIDTH, initial_indent="    why:     ", subsequent_indent=" " * 13,
                        break_long_words=False, break_on_hyphens=False) if change.reason.startswith("blocked") else []
    return [f"    after:   {'; '.join(shown)}", *why]


def _bound_lines(change: Change) -> list[str]:
    """Under a follower's run: the values its `${job:...}` references were given (from its record: shown only)."""
    run = change.current
    if run is None or not run.bindings:
        return []
    return [f"    {'bound:' if i == 0 else '':9}{printable(key)[:80]} = {printable(value)[:200]}"
            for i, (key, value) in enumerate(sorted(run.bindings.items())[:8])]


def _change_lines(change: Change, colour: bool) -> list[str]:
    symbol = change.action.symbol
    head = f"{symbol:>3} {change.address}"
    if colour:
        head = typer.style(head, fg=change.action.colour, bold=True)
    if change.action is Action.RETRY:  # + retry job.NAME (attempt 2/3: nccl_timeout)
        head = head.replace(change.address, f"retry {change.address}")
    lines = [f"{head}  ({change.action.value}: {change.reason})"]
    if change.queue is not None:
        lines.append(f"      demand: {change.queue.demand} (priority {change.queue.priority})")
    lines += [f"      {line}" for line in verl_lines(change)]
    if change.deadline_at and change.action is not Action.DEADLINE:
        lines.append(f"      deadline: {utc(change.deadline_at)} (max_runtime)")
    for d in change.diff:
        lines.extend(_field_lines(d, colour))
    if shows_submission(change):
        lines.extend(_submission_lines(change.after))
    lines.extend(f"      step: {step.describe()}" for step in change.steps)
    lines.append("")
    return lines


def verl_lines(change: Change) -> list[str]:
    """What the snapshot's verl will do with a job that starts: the same lines in every view."""
    note = change.verl
    if note is None:
        return []
    lines = [f"verl:   {note.version or 'version unknown'} ({note.checked}); {note.entry}", f"pools:  {note.pools}"]
    return lines + ([f"resume: {note.resume}"] if note.resume else [])


def _field_lines(d: FieldChange, colour: bool) -> list[str]:
    """One line per field; a changed entrypoint as an argv diff, which reviewers can read."""
    rows = field_argv_diff(d.path, d.before, d.after)
    if rows is None:
        return [f"      ~ {d.path}: {_show(d.before)} -> {_show(d.after)}"]
    return [f"      ~ {d.path}:", *(_marked(mark, line, colour) for mark, line in rows)]


def _marked(mark: str, line: str, colour: bool) -> str:
    text = f"        {mark} {line}"
    return typer.style(text, fg=_MARK_COLOURS[mark]) if colour and mark in _MARK_COLOURS else text


def _submission_lines(after: dict[str, Any]) -> list[str]:
    resources = {k: after.get(f"entrypoint_{k}") for k in ("num_cpus", "num_gpus", "memory")}
    shown = {k: v for k, v in resources.items() if v is not None} | after.get("entrypoint_resources", {})
    lines = ["      entrypoint:", *(f"        {line}" for line in argv_lines(after["entrypoint"]))]
    if shown:
        lines.append("      driver needs: " + ", ".join(f"{k}={_show(v)}" for k, v in shown.items()))
    if after.get("env_vars"):
        lines.append("      env: " + ", ".join(sorted(after["env_vars"])))
    return lines


def render_diagnostics(diagnostics: list[Diagnostic], colour: bool = False) -> str:
    return "\n".join(_diagnostic_lines(tuple(diagnostics), colour)).rstrip()


def _diagnostic_lines(diagnostics: tuple[Diagnostic, ...], colour: bool) -> list[str]:
    lines = []
    for d in diagnostics:
        label = "Error" if d.severity == "error" else "Warning"
        if colour:
            label = typer.style(label, fg="red" if d.severity == "error" else "yellow", bold=True)
        where = f"{d.where}: " if d.where else ""
        lines.append(f"{label}: {where}{plain(d.text)}")  # a diagnostic may quote Ray or a dashboard
    return lines + ([""] if lines else [])


def _show(value: Any) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return value if isinstance(value, str) and " " not in value and value else json.dumps(value)
