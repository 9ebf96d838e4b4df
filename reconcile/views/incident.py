"""The analysis report of an interruption (issue 38 item 5, docs/incidents.md): from a run's incident record, what
happened, the most likely cause with its evidence lines, what to do, and what argus does next.

`report` makes the data (the `report` of the loop's JSON events, schema/incident-report.schema.json);
`render` makes the text `argus status --run ID` prints. Pure: the record is read by the caller, the next
step decided by reconcile.plan.health.next_step (or, in the loop, reconcile.serve.events). The record came
from a directory every job can write: every field is checked for its type here, and text shown is plain.
"""

from __future__ import annotations

from typing import Any

from specs.diagnostics import plain
from state.runs.failures import Evidence, advice_for, classify, matched_lines

SCHEMA_ID = "https://argus.invalid/schema/incident-report.schema.json"
REPORT_VERSION = 1
MAX_EVIDENCE = 8
MAX_LINE = 300
HAPPENED = {
    "failed": "failed", "lost": "was lost with a node of its cluster", "deadline": "was stopped at its max_runtime",
    "stalled": "stalled: still running, but no longer making progress",
    "idle": "is idle: it holds GPUs it barely uses",
}


def report(record: dict[str, Any], next_action: str, next_words: str) -> dict[str, Any]:
    """The report of one incident record (incident.read's), as plain JSON data."""
    kind = _text(record.get("kind")) if record.get("kind") in HAPPENED else "failed"
    failure = _text(record.get("failure")) or None
    cause = failure or (kind if kind in ("idle", "stalled") else None)
    ray_job = record.get("ray_job") if isinstance(record.get("ray_job"), dict) else {}
    return {
        "report_version": REPORT_VERSION,
        "submission_id": _text(record.get("submission_id")), "workspace": _text(record.get("workspace")),
        "job": _text(record.get("job")), "cluster": _text(record.get("cluster")),
        "attempt": attempt if isinstance(attempt := record.get("attempt"), int) and not isinstance(attempt, bool)
        and attempt >= 1 else None,
        "interruption": kind, "time": _text(record.get("time")),
        "what_happened": _happened(record, kind, ray_job),
        "cause": {"class": cause, "evidence": _evidence(record, failure, ray_job)},
        "advice": advice_for(cause),
        "next": {"action": next_action, "detail": next_words},
        "checkpoint_step": _checkpoint_step(record),
        "stacks_captured": bool(record.get("stacks")),
        "record": f"jobs/{_text(record.get('submission_id'))}/incident.json",
        "problems": [_line(p) for p in record.get("problems", []) if isinstance(p, str)][:20],
    }


def render(found: dict[str, Any]) -> str:
    """The report for people: a few labelled lines, then the evidence, the advice and the next step."""
    cause = found["cause"]
    lines = [f"run {found['submission_id']} (job.{found['job']}, attempt {found['attempt']}, "
             f"cluster {found['cluster']})",
             f"what happened: {found['what_happened']}",
             f"likely cause:  {cause['class'] or 'not known'}"]
    lines += [f"  | {line}" for line in cause["evidence"]] or ["  (no evidence line: see the log tail in the record)"]
    if found["advice"]:
        lines.append(f"what to do:    {found['advice']}")
    lines.append(f"argus next:    {found['next']['detail']} [{found['next']['action']}]")
    if found["checkpoint_step"] is not None:
        lines.append(f"checkpoint:    step {found['checkpoint_step']}")
    lines.append(f"stacks:        {'captured' if found['stacks_captured'] else 'not captured'}")
    lines += [f"not read:      {problem}" for problem in found["problems"]]
    lines.append(f"record:        {found['record']} on the shared root")
    return "\n".join(plain(line) for line in lines)


def _happened(record: dict[str, Any], kind: str, ray_job: dict[str, Any]) -> str:
    said = [f"the run {HAPPENED[kind]}"]
    if _text(ray_job.get("status")):
        said.append(f"Ray says {_text(ray_job.get('status'))}")
    if isinstance(ray_job.get("driver_exit_code"), int):
        said.append(f"driver exit code {ray_job['driver_exit_code']}")
    if _text(ray_job.get("message")):
        said.append(_line(_text(ray_job.get("message")).splitlines()[0]))
    if _text(record.get("detail")):
        said.append(_line(_text(record.get("detail"))))
    tasks, actors = _rows(record, "failed_tasks"), _rows(record, "dead_actors")
    if tasks or actors:
        said.append(f"{len(tasks)} failed task(s), {len(actors)} dead actor(s)")
    return "; ".join(said)


def _evidence(record: dict[str, Any], failure: str | None, ray_job: dict[str, Any]) -> list[str]:
    """The lines that make the class (the failure rules' own), then the errors Ray kept of tasks and actors."""
    exit_code = ray_job.get("driver_exit_code") if isinstance(ray_job.get("driver_exit_code"), int) else None
    evidence = Evidence(status="FAILED", error_type=_text(ray_job.get("error_type")), exit_code=exit_code,
                        message=_text(ray_job.get("message")), log_tail=_text(record.get("log_tail")))
    lines = list(matched_lines(evidence, failure or classify(evidence))) if record.get("kind") not in (
        "idle", "stalled") else []
    for task in _rows(record, "failed_tasks"):
        if _text(task.get("error_message")):
            lines.append(f"task {_text(task.get('name'))}: {_last_line(_text(task.get('error_message')))}")
    for actor in _rows(record, "dead_actors"):
        cause = actor.get("death_cause")
        if cause:
            lines.append(f"actor {_text(actor.get('class_name'))}: {_last_line(str(cause))}")
    return [_line(line) for line in dict.fromkeys(lines)][:MAX_EVIDENCE]


def _checkpoint_step(record: dict[str, Any]) -> int | None:
    checkpoint = record.get("checkpoint")
    step = checkpoint.get("step") if isinstance(checkpoint, dict) else None
    return step if isinstance(step, int) and not isinstance(step, bool) else None


def _rows(record: dict[str, Any], key: str) -> list[dict[str, Any]]:
    rows = record.get(key)
    return [row for row in rows if isinstance(row, dict)] if isinstance(rows, list) else []


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _text(value: Any) -> str:
    """One visible line: a field of the record (any job can write it) never starts a line of its own."""
    return _line(value) if isinstance(value, str) else ""


def _line(text: str) -> str:
    text = plain(text, lines=False).strip()
    return text if len(text) <= MAX_LINE else text[:MAX_LINE - 1] + "…"
