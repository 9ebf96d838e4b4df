"""Machine and pull-request renderings of plans and status: JSON (versioned) and markdown.

Both take the Plan the human view takes; neither decides anything. docs/plan-format.md is the
JSON schema's documentation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from reconcile.model import Action, Change, FieldChange, Plan
from reconcile.views.argv import argv_lines, field_argv_diff
from reconcile.views.human import Unseen, failed_run, health_of, shows_submission, summary, sync_of, verl_lines
from reconcile.views.run_progress import progress_json
from specs.diagnostics import plain

JSON_FORMAT_VERSION = 1
MARKDOWN_LIMIT = 60_000
"""GitHub refuses comments over 65,536 characters: large plans are summarised below this."""


def plan_json(plan: Plan) -> str:
    data = {"format_version": JSON_FORMAT_VERSION, "summary": _counts(plan), **plan.model_dump(mode="json")}
    return json.dumps(data, indent=2, sort_keys=True)


def status_json(plan: Plan, desired_jobs: set[str], unseen: Unseen | None = None,
                gpus_held: Mapping[str, Mapping[str, float]] | None = None,
                gpu: Mapping[str, str] | None = None) -> str:
    """`unreachable` names each cluster that did not answer and why; its jobs' sync is "unknown".
    A job whose current run failed has its failure class, advice and evidence; the others null and [].
    A job that waits in the admission queue has its `queue` place; `gpus_held`: per cluster, the GPUs
    each workspace's admitted runs hold (reconcile.views.queue.gpus_held). `gpu`: each active run's GPU use as
    status shows it (reconcile.views.gpu.cells): a job with an active run has `gpu` ("unknown" when not read)."""
    unseen = unseen or Unseen()
    rows = [{"address": c.address, "sync": sync_of(c, desired_jobs, unseen), "health": health_of(c, unseen),
             "submission_id": c.current.submission_id if c.current else None, **_failure(c), **_queue(c),
             **({"deadline_at": c.deadline_at} if c.deadline_at else {}), **_after(c), **_bindings(c),
             **progress_json(c.current), **_gpu_field(c, gpu)}
            for c in sorted(plan.changes, key=lambda c: c.address) if c.address.startswith("job.")]
    unmanaged = [j.model_dump(mode="json") for j in plan.unmanaged]
    held = {cluster: dict(by_workspace) for cluster, by_workspace in sorted((gpus_held or {}).items())}
    return json.dumps({"format_version": JSON_FORMAT_VERSION, "workspace": plan.workspace, "jobs": rows,
                       "unmanaged": unmanaged, "unreachable": dict(unseen.clusters), "gpus_held": held},
                      indent=2, sort_keys=True)


def _gpu_field(change: Change, gpu: Mapping[str, str] | None) -> dict[str, str]:
    """`gpu` for a job with an active run (its use, or "unknown"), as `progress` is only where there is one."""
    shown = _gpu_of(change, gpu) if gpu is not None else None
    return {"gpu": shown} if shown is not None else {}


def _gpu_of(change: Change, gpu: Mapping[str, str]) -> str | None:
    run = change.current
    return gpu.get(run.submission_id, "unknown") if run is not None and run.on_ray and not run.finished else None


def plan_markdown(plan: Plan, limit: int = MARKDOWN_LIMIT) -> str:
    """Summary table first, details folded; rows beyond the limit are counted, not shown."""
    head = [f"### argus plan for {_code(plan.workspace)}", "", f"**{summary(plan)}**", ""]
    head += [f"- {'❌' if d.severity == 'error' else '⚠️'} {_code(str(d.where or d.address))}: {md(d.text)}"
             for d in plan.diagnostics]
    rows = ["", "| | address | action | why |", "|---|---|---|---|"]
    rows += [f"| {_code(c.action.symbol)} | {_code(c.address)} | {c.action.value} | {md(c.reason)} |"
             for c in (*plan.actionable, *plan.drifted, *plan.following)]
    details = ["", "<details><summary>Details</summary>", "", fenced("\n".join(_detail_lines(plan)), "diff"),
               "</details>"]
    text = "\n".join(head + rows + details)
    if len(text) <= limit:
        return text
    return _summarised(head, rows, limit)


def _summarised(head: list[str], rows: list[str], limit: int) -> str:
    kept, size = [], len("\n".join(head)) + 200
    for row in rows:
        if size + len(row) + 1 > limit:
            break
        kept.append(row)
        size += len(row) + 1
    hidden = len(rows) - len(kept)
    note = f"\n\n_{hidden} more row(s) and the details are left out to stay under {limit} characters; " \
           "run `argus plan` for the whole plan._"
    return "\n".join(head + kept) + note


def _detail_lines(plan: Plan) -> list[str]:
    lines: list[str] = []
    for change in (*plan.actionable, *plan.following):
        lines.append(f"{_diff_marker(change)} {change.address}  ({change.action.value}: {change.reason})")
        lines += [f"    {line}" for line in verl_lines(change)]
        lines += [line for d in change.diff for line in _field_lines(d)]
        if shows_submission(change):
            lines += ["    entrypoint:", *(f"        {line}" for line in argv_lines(change.after["entrypoint"]))]
        lines += [f"    {step.describe()}" for step in change.steps]
    return lines


def _field_lines(d: FieldChange) -> list[str]:
    """A changed entrypoint as an argv diff: its - and + in the first column colour in a diff block."""
    rows = field_argv_diff(d.path, d.before, d.after)
    if rows is None:
        return [f"    ~ {d.path}: {_value(d.before)} -> {_value(d.after)}"]
    return [f"    ~ {d.path}:", *(f"{mark}       {line}" for mark, line in rows)]


def _diff_marker(change: Change) -> str:
    """diff syntax colours + green and - red; a replace shows as a change (!)."""
    return {Action.REPLACE: "!"}.get(change.action, change.action.symbol[0])


def _failure(change: Change) -> dict[str, Any]:
    run = failed_run(change)
    if run is None:
        return {"failure": None, "advice": None, "evidence": []}
    return {"failure": run.failure, "advice": run.advice, "evidence": list(run.evidence)}


def _queue(change: Change) -> dict[str, Any]:
    """Only for a job that waits in the queue: the other rows keep their keys as before."""
    info = change.queue
    if info is None or info.position is None:
        return {}
    return {"queue": {"cluster": info.cluster, "position": info.position, "reason": info.reason,
                      "demand": info.demand, "gpus": info.gpus, "priority": info.priority}}


def _after(change: Change) -> dict[str, Any]:
    """Only for a job that waits on its predecessors (`after:`): each one, its state, whether it blocks."""
    if change.action is not Action.WAIT:
        return {}
    return {"waiting_on": [w.model_dump(mode="json") for w in change.waiting_on], "reason": change.reason}


def _bindings(change: Change) -> dict[str, Any]:
    """Only for a follower's run that was given `${job:...}` values (its record's, as submitted)."""
    run = change.current
    return {"bindings": dict(run.bindings)} if run is not None and run.bindings else {}


def _counts(plan: Plan) -> dict[str, int]:
    return {a.value: n for a, n in plan.counts().items() if a is not Action.NOOP}


MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]|~@:])|(?<=www)(\.)", re.IGNORECASE)
"""What starts markup inside a line (emphasis, code, links, tables, strikethrough) or GitHub's @mentions and
autolinks (`http:`, `www.`): each is backslash-escaped. Markers that act only at a line's start (#, -, 1.)
need none: the text is one line placed after argus's own."""


def md(text: str) -> str:
    """Text from anywhere (Ray's job table, a dashboard's error, a spec) as one inert line of a pull-request
    comment: control characters and terminal escapes dropped, line breaks made spaces, markdown punctuation
    backslash-escaped and <, >, & written as entities, so it renders as the very text, never as markup,
    HTML, a link, a mention, or a break out of the table cell it is in."""
    text = plain(text, lines=False).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return MARKDOWN_SPECIAL.sub(lambda m: "\\" + m.group(0), text)


def _code(text: str) -> str:
    """Inline code whose fence no backtick inside can close; | escaped, as a table cell needs even there."""
    text = plain(text, lines=False).replace("|", "\\|")
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def fenced(text: str, info: str = "") -> str:
    """A code block no line inside can end (its fence is longer than any run of backticks in it), with
    control characters and terminal escapes dropped: HTML and markdown in it show as text."""
    text = plain(text)
    fence = "`" * max(3, max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    return f"{fence}{info}\n{text}\n{fence}"


def _value(value: Any) -> str:
    return json.dumps(value)
