"""Builds grafana/argus-dashboard.json from the panels below: `python grafana/build.py` (a test holds the committed
file to this script and every query to the series argus serve exports)."""

from __future__ import annotations

import json
from pathlib import Path

OUT = Path(__file__).with_name("argus-dashboard.json")
panels = []
def panel(title, exprs, kind="timeseries", w=12, h=8, unit=None, legend=None, desc=""):
    pid = len(panels) + 1
    x = 0 if sum(p["gridPos"]["w"] for p in panels) % 24 == 0 else 12
    y = sum(p["gridPos"]["h"] for p in panels[::2]) if False else (len(panels) // 2) * 8
    targets = [{"datasource": {"type": "prometheus", "uid": "${datasource}"}, "expr": e, "refId": chr(65 + i),
                "legendFormat": (legend or ["__auto"] * len(exprs))[i]} for i, e in enumerate(exprs)]
    p = {"id": pid, "type": kind, "title": title, "description": desc,
         "datasource": {"type": "prometheus", "uid": "${datasource}"},
         "gridPos": {"x": x, "y": y, "w": w, "h": h}, "targets": targets,
         "fieldConfig": {"defaults": {"unit": unit} if unit else {}, "overrides": []}, "options": {}}
    panels.append(p)
W = 'workspace=~"$workspace"'
panel("Loops: active (1) or standby (0)", [f"argus_loop_active{{{W}}}"], "stat", legend=["{{workspace}}"],
      desc="Which argus serve holds each workspace's lease. A standby everywhere means nobody acts.")
panel("Seconds since the last good turn", [f"time() - argus_last_success_timestamp_seconds{{{W}}}"], unit="s",
      legend=["{{workspace}}"], desc="Rises without bound when a loop stops acting (the loop_failing incident).")
panel("Open incidents", [f"sum by (workspace, kind, subject) (argus_incident_open{{{W}}})"], "table",
      desc="unreachable, root_distrusted, desired_state, loop_failing, notify_blocked: each also sent as an event.")
panel("Incidents begun (per hour)", [f"sum by (workspace, kind) (increase(argus_incidents_total{{{W}}}[1h]))"],
      legend=["{{workspace}} {{kind}}"])
panel("Runs by status", [f"sum by (workspace, status) (argus_runs{{{W}}})"], legend=["{{workspace}} {{status}}"])
panel("Failed or lost runs by class", [f"sum by (workspace, class) (argus_run_failures{{{W}}})"],
      legend=["{{workspace}} {{class}}"])
panel("Retries and deadline stops (per hour)", [f"sum by (workspace) (increase(argus_retries_total{{{W}}}[1h]))",
      f"sum by (workspace) (increase(argus_deadline_stops_total{{{W}}}[1h]))"],
      legend=["{{workspace}} retries", "{{workspace}} deadline stops"])
panel("Drift: changes found and not carried out", [f"argus_drift_changes{{{W}}}"], legend=["{{workspace}}"])
panel("GPUs held per workspace", [f"sum by (workspace, cluster) (argus_gpus_held{{{W}}})"],
      legend=["{{cluster}} {{workspace}}"], desc="What the admitted runs of each workspace hold on each cluster.")
panel("Jobs waiting in the admission queue", [f"sum by (workspace, cluster) (argus_queue_waiting{{{W}}})"],
      legend=["{{cluster}} {{workspace}}"])
panel("Turn duration", [f"argus_loop_duration_seconds{{{W}}}"], unit="s", legend=["{{workspace}}"])
panel("Loop errors (per hour)", [f"sum by (workspace) (increase(argus_loop_errors_total{{{W}}}[1h]))"],
      legend=["{{workspace}}"])
panel("Run progress (%)", [f"100 * argus_run_step{{{W}}} / argus_run_steps_total{{{W}}}"], unit="percent",
      legend=["{{workspace}}/{{job}}"], desc="Step N of M each running run reports (verl step lines, argus:progress).")
panel("Run ETA", [f"argus_run_eta_seconds{{{W}}}"], unit="s", legend=["{{workspace}}/{{job}}"],
      desc="At the run's recent step rate; a flat line that keeps rising is a run that stopped stepping.")
panel("GPU utilisation per run", [f"argus_run_gpu_utilization{{{W}}}"], unit="percent",
      legend=["{{workspace}}/{{job}}"], desc="Mean over the run's GPUs (Ray's node stats). A flat line near 0 is idle.")
panel("GPUs held and busy per cluster", ["sum by (cluster) (argus_gpus_held)", "sum by (cluster) (argus_gpus_busy)"],
      legend=["{{cluster}} held", "{{cluster}} busy"],
      desc="Held: what admitted runs hold. Busy: GPUs at 5% or more. The gap is what better scheduling can win.")
dash = {"title": "argus", "uid": "argus-overview", "schemaVersion": 39, "version": 1, "editable": True,
        "description": "argus serve's metrics (docs/health.md): loops, incidents, runs, the queue, GPUs.",
        "tags": ["argus", "ray"], "time": {"from": "now-24h", "to": "now"}, "refresh": "1m",
        "templating": {"list": [
            {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"},
            {"name": "workspace", "type": "query", "label": "Workspace", "multi": True, "includeAll": True,
             "allValue": ".*", "current": {"text": "All", "value": "$__all"},
             "datasource": {"type": "prometheus", "uid": "${datasource}"},
             "query": {"query": "label_values(argus_loop_active, workspace)", "refId": "workspaces"},
             "definition": "label_values(argus_loop_active, workspace)", "refresh": 2}]},
        "panels": panels}
if __name__ == "__main__":
    OUT.write_text(json.dumps(dash, indent=2) + "\n")
