"""Human renderings of plans and status. Views take data and return text; they decide nothing."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import click

from reconcile.model import Action, Change, Diagnostic, Plan, StopStep, SubmitStep

_COLOURS = {Action.SUBMIT: "green", Action.STOP: "red", Action.REPLACE: "yellow", Action.NOOP: None}


def render_plan(plan: Plan, colour: bool = False) -> str:
    lines = [f"argus plan for workspace {plan.workspace!r}", ""]
    for change in plan.actionable:
        lines.extend(_change_lines(change, colour))
    in_sync = [c for c in plan.changes if c.action is Action.NOOP]
    if in_sync:
        lines.append("  Unchanged:")
        lines.extend(f"    {c.address}: {c.reason}" for c in in_sync)
        lines.append("")
    lines.extend(_unmanaged_lines(plan))
    lines.extend(_diagnostic_lines(plan.diagnostics, colour))
    lines.append(summary(plan))
    return "\n".join(lines)


def summary(plan: Plan) -> str:
    if not plan.actionable:
        return "No changes. The clusters match the desired state."
    counts = plan.counts()
    parts = [f"{counts[a]} to {a.value}" for a in (Action.SUBMIT, Action.REPLACE, Action.STOP)]
    return f"Plan: {', '.join(parts)}."


def render_step(step: SubmitStep | StopStep) -> str:
    if isinstance(step, SubmitStep):
        return f"submit {step.submission_id} to cluster {step.cluster}"
    if isinstance(step, StopStep):
        return f"stop {step.submission_id} on cluster {step.cluster} and wait until it has stopped"
    raise TypeError(f"unknown step type {type(step).__name__}")


def _change_lines(change: Change, colour: bool) -> list[str]:
    symbol = change.action.symbol
    head = f"{symbol:>3} {change.address}"
    if colour:
        head = click.style(head, fg=_COLOURS[change.action], bold=True)
    lines = [f"{head}  ({change.action.value}: {change.reason})"]
    lines.extend(f"      ~ {d.path}: {_show(d.before)} -> {_show(d.after)}" for d in change.diff)
    if change.action is Action.SUBMIT and change.before is None and change.after:
        lines.extend(_submission_lines(change.after))
    lines.extend(f"      step: {render_step(step)}" for step in change.steps)
    lines.append("")
    return lines


def _submission_lines(after: dict[str, Any]) -> list[str]:
    resources = {k: after.get(f"entrypoint_{k}") for k in ("num_cpus", "num_gpus", "memory")}
    shown = {k: v for k, v in resources.items() if v is not None} | after.get("entrypoint_resources", {})
    lines = [f"      entrypoint: {after['entrypoint']}"]
    if shown:
        lines.append("      driver needs: " + ", ".join(f"{k}={_show(v)}" for k, v in shown.items()))
    if after.get("env_vars"):
        lines.append("      env: " + ", ".join(sorted(after["env_vars"])))
    return lines


def _unmanaged_lines(plan: Plan) -> list[str]:
    if not plan.unmanaged:
        return []
    per_cluster = Counter(j.cluster for j in plan.unmanaged)
    shown = ", ".join(f"{n} on {c}" for c, n in sorted(per_cluster.items()))
    return [f"  Not managed by this workspace (never touched): {shown}", ""]


def _diagnostic_lines(diagnostics: tuple[Diagnostic, ...], colour: bool) -> list[str]:
    lines = []
    for d in diagnostics:
        label = "Error" if d.severity == "error" else "Warning"
        if colour:
            label = click.style(label, fg="red" if d.severity == "error" else "yellow", bold=True)
        where = f"{d.where}: " if d.where else ""
        lines.append(f"{label}: {where}{d.message}")
    return lines + ([""] if lines else [])


def _show(value: Any) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return value if isinstance(value, str) and " " not in value and value else json.dumps(value)
