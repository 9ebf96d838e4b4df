"""Incidents from plain turn reports (reconcile.serve.incidents): each told once when it begins and once when it
ends, /healthz failing and /metrics counting meanwhile (a real StatusServer on loopback)."""

from __future__ import annotations

import urllib.error
import urllib.request
from dataclasses import replace

from reconcile.model import Plan
from reconcile.report import TurnReport
from reconcile.serve.http import StatusServer
from reconcile.serve.incidents import Incidents
from reconcile.serve.metrics import Metrics
from reconcile.views.html import Kept, Site

NOW = 1_800_000_000.0


def report(ok: bool = True, **fields: object) -> TurnReport:
    base = TurnReport(workspace="ws", started_at=NOW, finished_at=NOW + 1, ok=ok, interval=5, sync="off",
                      plan=Plan(workspace="ws", changes=()) if ok else None, error=None if ok else "boom")
    return replace(base, **fields)


def kinds(events) -> list[tuple[str, str]]:
    return [(e.kind, e.details.get("incident", "")) for e in events]


def test_a_cluster_that_does_not_answer_is_told_once_and_once_more_when_it_answers_again():
    book = Incidents("ws")
    assert book.update(report(), NOW) == []
    down = report(unreachable={"local": "connection refused"})
    [began] = book.update(down, NOW + 5)
    assert (began.kind, began.cluster, began.details) == ("incident", "local", {"incident": "unreachable"})
    assert "cluster local does not answer: connection refused" in began.summary
    assert book.update(down, NOW + 10) == [] and book.update(down, NOW + 15) == []  # once, however long
    assert [i.kind for i in book.current()] == ["unreachable"]
    assert book.update(report(ok=False), NOW + 20) == []  # a failed turn read no cluster: it cannot tell
    [back] = book.update(report(), NOW + 25)
    assert back.kind == "recovered" and back.summary == "cluster local answers again (after 20 s)"
    assert book.current() == ()
    [again] = book.update(down, NOW + 100)  # a second outage is a new incident
    assert again.key != began.key


def test_a_desired_state_that_does_not_load_and_turns_that_keep_failing():
    book = Incidents("ws")
    broken = report(ok=False, failed_at="load", error="jobs/a.yaml:3: not a job")
    assert kinds(book.update(broken, NOW)) == [("incident", "desired_state")]
    assert "jobs/a.yaml:3: not a job" in book.current()[0].summary
    assert kinds(book.update(report(), NOW + 5)) == [("recovered", "desired_state")]
    assert book.update(report(ok=False), NOW + 10) == []  # one failed turn is often a blip
    assert kinds(book.update(report(ok=False), NOW + 15)) == [("incident", "loop_failing")]
    assert kinds(book.update(report(), NOW + 20)) == [("recovered", "loop_failing")]


def test_healthz_fails_and_metrics_count_while_an_incident_is_open():
    metrics, book = Metrics(), Incidents("ws")
    server = StatusServer("127.0.0.1", 0, metrics, kept=[Kept("ws", clusters={"local": Site()})])
    try:
        down = report(unreachable={"local": "refused"})
        told = book.update(down, NOW)
        shown = replace(down, events=tuple(told), incidents=book.current(), finished_at=NOW)
        for publish in (server.publish, metrics.record):
            publish(shown)
        code, body = _get(server.port, "/healthz")
        assert code == 503 and "incident: cluster local does not answer: refused" in body
        text = _get(server.port, "/metrics")[1]
        assert 'argus_incidents_total{kind="unreachable",workspace="ws"} 1.0' in text
        assert 'argus_incident_open{kind="unreachable",subject="local",workspace="ws"} 1.0' in text
        page = _get(server.port, "/")[1]
        assert "incident</span> since" in page and "cluster local does not answer" in page
    finally:
        server.close()


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_a_client_that_goes_away_mid_reply_writes_nothing_to_the_log(capsys):
    """Issue 37: a disconnect wrote a traceback into serve's (JSON) log; now nothing, and any other error of
    a request one plain line."""
    server = StatusServer("127.0.0.1", 0, Metrics())
    try:
        for error in (BrokenPipeError(32, "Broken pipe"), ConnectionResetError(104, "reset"), TimeoutError()):
            try:
                raise error
            except OSError:
                server._httpd.handle_error(None, ("127.0.0.1", 1))
        assert capsys.readouterr().err == ""
        try:
            raise ValueError("odd\nrequest")
        except ValueError:
            server._httpd.handle_error(None, ("127.0.0.1", 1))
        assert capsys.readouterr().err == "argus serve: status page: ValueError: odd request\n"
    finally:
        server.close()


def test_a_linked_ledger_directory_is_an_incident_not_a_silent_loop(tmp_path):
    """Issue 37: a job links the sent-event ledger away: nothing can be told, so /healthz must say it."""
    from reconcile.serve.notify import Notifier

    notifier = Notifier(["json://127.0.0.1:9/argus"], str(tmp_path), "ws")
    assert notifier.blocked() is None
    (tmp_path / "elsewhere").mkdir()
    sent = tmp_path / ".argus" / "serve" / "ws" / "sent"
    sent.rmdir()
    sent.symlink_to(tmp_path / "elsewhere")
    why = notifier.blocked()
    assert why is not None and "the ledger at" in why and "cannot be used" in why
    book = Incidents("ws")
    [began] = book.update(report(), NOW, why)
    assert began.details == {"incident": "notify_blocked"} and book.current()[0].kind == "notify_blocked"
    sent.unlink()
    [back] = book.update(report(), NOW + 5, notifier.blocked())
    assert back.kind == "recovered" and back.summary.startswith("notifications can be sent again")


def test_a_lone_loop_that_cannot_take_its_lease_is_not_healthy():
    """A loop on a root never laid out stands by for nobody, acting never: /healthz must not say ok (as the
    multi-workspace /healthz already did)."""
    server = StatusServer("127.0.0.1", 0, Metrics(), kept=[Kept("ws", clusters={"local": Site()})])
    try:
        server.publish(report(plan=None, standby="nobody", notes=("standby: nobody holds the lease",)))
        code, body = _get(server.port, "/healthz")
        assert code == 503 and "no loop holds the lease" in body
        server.publish(report(plan=None, standby="gpu-7:4242:0a1b", notes=("standby: gpu-7:4242:0a1b holds it",)))
        assert _get(server.port, "/healthz")[0] == 200
    finally:
        server.close()


def test_a_shared_root_argus_does_not_trust_is_told_once_and_an_unread_cluster_does_not_end_it():
    book = Incidents("ws")
    bare = report(distrusted={"local": "it holds no identity ... the NFS looks unmounted"})
    [began] = book.update(bare, NOW)
    assert (began.kind, began.cluster, began.details) == ("incident", "local", {"incident": "root_distrusted"})
    assert began.summary.startswith("the shared root of cluster local is not trusted, so none of its jobs is "
                                    "planned: it holds no identity") and "looks unmounted" in began.summary
    assert book.update(bare, NOW + 5) == []
    assert book.update(report(unreachable={"local": "refused"}), NOW + 10) != []  # its own incident, not an end
    assert [i.kind for i in book.current()] == ["root_distrusted", "unreachable"]
    [back] = [e for e in book.update(report(), NOW + 15) if e.details["incident"] == "root_distrusted"]
    assert back.kind == "recovered" and back.summary == "the shared root of cluster local is trusted again (after 15 s)"
