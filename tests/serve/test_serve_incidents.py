"""Incidents under `argus serve` on real clusters (issue 37): a head stopped and started again, a desired state
that stops loading. Each is one event, one `recovered` when it ends, and /healthz fails meanwhile."""

from __future__ import annotations

import urllib.error
import urllib.request

from state.ray import local
from tests.support.cluster import QUICK, start_cluster, until
from tests.support.loops import listening, serve, stopped
from tests.support.workspace import make_workspace


def test_a_head_that_goes_down_is_one_incident_and_one_recovery(tmp_path, hook, argus):
    url, events = hook
    state_dir = tmp_path / "cluster"
    cluster = start_cluster(state_dir)
    try:
        ws = make_workspace(tmp_path / "ws", "heads", cluster.address)
        ws.job("a", QUICK, extra="state: stopped\n")
        assert argus("apply", ws.root, "--auto-approve").code == 0  # the root laid out: the loop may act
        loop = serve(ws, "--interval", "2", "--watch", "0", "--notify", url, "--listen", "127.0.0.1:0")
        try:
            site = listening(loop)
            until(lambda: _health(site)[0] == 200, "a healthy first turn", 60)
            local.down(state_dir)
            until(lambda: _told(events, "incident"), "the incident event", 60)
            # the loop tells, then publishes the turn to the page: /healthz follows a moment after the event
            code, body = until(lambda: (h := _health(site))[0] == 503 and h, "/healthz 503", 30)
            assert "incident: cluster local does not answer" in body, body
            cluster = local.up(state_dir, dashboard_port=cluster.dashboard_port, cpus_per_node=8,
                               worker_resources={"worker_node": 8.0})
            until(lambda: _told(events, "recovered"), "the recovered event", 90)
            until(lambda: _health(site)[0] == 200, "/healthz ok again", 30)
        finally:
            code, err = stopped(loop)
        assert code == 0, err
    finally:
        local.down(state_dir)
    [began], [ended] = _told(events, "incident"), _told(events, "recovered")
    assert began["cluster"] == "local" and began["details"] == {"incident": "unreachable"}
    assert ended["summary"].startswith("cluster local answers again (after ")


def test_a_desired_state_that_stops_loading_is_its_incident_until_it_loads(workspace, argus, hook):
    url, events = hook
    workspace.job("a", QUICK, extra="state: stopped\n")
    assert argus("apply", workspace.root, "--auto-approve").code == 0  # the root laid out: the loop may act
    loop = serve(workspace, "--interval", "2", "--notify", url, "--listen", "127.0.0.1:0")
    try:
        site = listening(loop)
        until(lambda: _health(site)[0] == 200, "a healthy first turn", 60)
        broken = workspace.root / "jobs" / "broken.yaml"
        broken.write_text("kind: Job\nname: broken\ncluster: local\nworkload: command\nentrypoint: 7\n")
        until(lambda: _told(events, "incident"), "the incident event", 30)
        code, body = until(lambda: (h := _health(site))[0] == 503 and h, "/healthz 503", 30)
        assert "the desired state does not load" in body and "broken.yaml" in body, body
        broken.unlink()
        until(lambda: _told(events, "recovered"), "the recovered event", 30)
        until(lambda: _health(site)[0] == 200, "/healthz ok again", 30)
    finally:
        code, err = stopped(loop)
    assert code == 0, err
    [began] = _told(events, "incident")
    assert began["details"] == {"incident": "desired_state"} and "broken.yaml" in began["summary"]
    assert len(_told(events, "recovered")) == 1


def _told(events: list[dict], kind: str) -> list[dict]:
    return [e for e in events if e["kind"] == kind and "incident" in (e.get("details") or {})]


def _health(site: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"{site}healthz", timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()
    except OSError:
        return 0, ""
