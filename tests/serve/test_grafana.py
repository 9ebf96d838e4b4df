"""The Grafana dashboard in the repository asks only for series argus serve exports (a renamed metric would leave
a panel empty without a word), and is a dashboard Grafana can import."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client import generate_latest

from reconcile.serve.metrics import Metrics

DASHBOARD = Path(__file__).resolve().parents[2] / "grafana" / "argus-dashboard.json"


def exported() -> set[str]:
    """Every series name /metrics can carry: from the HELP lines of a fresh registry (each family, even empty)."""
    text = generate_latest(Metrics().registry).decode()
    names = set(re.findall(r"^# HELP (\S+)", text, re.MULTILINE))
    return names | {f"{name}_total" for name in names}  # a counter's samples carry _total


def test_every_panel_queries_series_argus_exports():
    dashboard = json.loads(DASHBOARD.read_text())
    asked = {(panel["title"], name) for panel in dashboard["panels"] for target in panel["targets"]
             for name in re.findall(r"\bargus_[a-z_]+", target["expr"])}
    assert asked, "no panel asks for an argus series"
    missing = sorted((title, name) for title, name in asked if name not in exported())
    assert missing == [], f"panels asking for series argus does not export: {missing}"


def test_it_is_an_importable_dashboard_with_unique_panels_and_a_datasource_choice():
    dashboard = json.loads(DASHBOARD.read_text())
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids)) and dashboard["uid"] and dashboard["title"] == "argus"
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"  # no datasource uid of ours baked in
    assert all(panel["datasource"]["uid"] == "${datasource}" for panel in dashboard["panels"])


def test_the_committed_dashboard_is_what_grafana_build_makes():
    import runpy

    built = runpy.run_path(str(DASHBOARD.with_name("build.py")))["dash"]
    assert json.loads(DASHBOARD.read_text()) == built, "stale: run `python grafana/build.py`"
