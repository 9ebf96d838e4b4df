"""Notifications through apprise to real loopback receivers: what arrives, once, and what a bad
receiver costs the loop (a bounded wait, a problem line, never an exception or a leaked token)."""

from __future__ import annotations

import json
import os
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, quote

import pytest

from reconcile.report import Event
from reconcile.serve.channels import NotifyError, channels, scrub
from reconcile.serve.messages import PAYLOAD_VERSION, body, payload, title
from reconcile.serve.notify import MAX_TRIES, Notifier
from state.queue.sent_events import SentLedger, key_hash
from tests.support.receivers import EVIDENCE, Receiver, event

SECRET = "hunter2-s3cret-t0ken"


class Silent:
    """Accepts connections and never answers."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        try:
            while True:
                self.held.append(self.listener.accept()[0])
        except OSError:  # closed
            return

    def close(self) -> None:
        self.listener.close()
        for conn in self.held:
            conn.close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    yield server
    server.close()


def closed_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as sock:
        return sock.getsockname()[1]


def test_the_json_event_arrives_whole_and_versioned(receiver: Receiver, tmp_path: Path) -> None:
    notifier = Notifier([f"json://argus:{SECRET}@127.0.0.1:{receiver.port}/argus/events"], str(tmp_path), "ws")
    assert notifier.deliver([event()]).problems == []

    [request] = receiver.received
    outer = json.loads(request["body"])
    assert request["path"] == "/argus/events"
    assert (outer["title"], outer["type"]) == ("argus: job.train: attempt 1 failed", "failure")
    sent = json.loads(outer["message"])
    assert sent["argus_event_version"] == PAYLOAD_VERSION == 1
    assert {k: sent[k] for k in ("kind", "key", "failure", "advice", "attempt", "max_attempts", "next")} == {
        "kind": "failed", "key": "ws:failed:ws.train.h.1", "failure": "nccl_timeout",
        "advice": "check the interconnect", "attempt": 1, "max_attempts": 3,
        "next": "retries it as attempt 2 of 3, from its checkpoint directory"}
    assert sent["evidence"] == list(EVIDENCE)
    assert set(sent) == {"argus_event_version", *Event.model_fields}


def test_people_get_text_with_class_evidence_advice_attempt_and_next(receiver: Receiver, tmp_path: Path) -> None:
    # form:// is apprise's plain form POST: what a chat service would be given, on loopback.
    notifier = Notifier([f"form://127.0.0.1:{receiver.port}/chat"], str(tmp_path), "ws")
    assert notifier.deliver([event()]).problems == []
    form = {k: v[0] for k, v in parse_qs(receiver.received[0]["body"]).items()}
    assert form["title"] == "argus: job.train: attempt 1 failed"
    text = form["message"]
    for line in ("class: nccl_timeout", "advice: check the interconnect", "attempt: 1 of 3",
                 "next: retries it as attempt 2 of 3", *EVIDENCE):
        assert line in text
    assert text == body(event())


def test_each_event_arrives_once_also_after_a_restart(receiver: Receiver, tmp_path: Path) -> None:
    url = f"json://127.0.0.1:{receiver.port}/hook"
    events = [event("failed", "ws.a.h.1"), event("pending", "ws.b.h.1"), event("recovered", "ws.c.h.2")]
    first = Notifier([url], str(tmp_path), "ws")
    assert first.deliver(events).problems == []
    assert first.deliver(events).problems == []  # the next turn derives the same events
    restarted = Notifier([url], str(tmp_path), "ws")  # a new loop process on the same shared root
    assert restarted.deliver([*events, event("stalled", "ws.d.h.1")]).problems == []
    keys = [e["key"] for e in receiver.events()]
    assert keys == ["ws:failed:ws.a.h.1", "ws:pending:ws.b.h.1", "ws:recovered:ws.c.h.2", "ws:stalled:ws.d.h.1"]


def test_a_failing_channel_does_not_make_a_working_one_hear_twice(tmp_path: Path) -> None:
    working, flaky = Receiver(), Receiver(statuses=[500])
    try:
        notifier = Notifier([f"json://127.0.0.1:{working.port}/a", f"json://127.0.0.1:{flaky.port}/b"],
                            str(tmp_path), "ws")
        [problem] = notifier.deliver([event()]).problems
        assert problem.startswith(f"#2 json://127.0.0.1:{flaky.port}: event ws:failed:ws.train.h.1 not sent "
                                  "(try 1 of 3")
        assert notifier.deliver([event()]).problems == []
        assert notifier.deliver([event()]).problems == []
        assert len(working.received) == 1
        assert len(flaky.received) == 2  # refused once, accepted once
    finally:
        working.close()
        flaky.close()


def test_an_event_is_given_up_after_three_tries(tmp_path: Path) -> None:
    refusing = Receiver(statuses=[500] * 10)
    try:
        notifier = Notifier([f"json://127.0.0.1:{refusing.port}/"], str(tmp_path), "ws")
        said = [notifier.deliver([event()]).problems for _ in range(MAX_TRIES + 2)]
        assert [len(problems) for problems in said] == [1, 1, 1, 0, 0]
        assert "given up after 3 tries" in said[2][0]
        assert len(refusing.received) == MAX_TRIES
        # Tries are counted on the shared root too: a restarted loop does not start again from 0.
        assert Notifier([f"json://127.0.0.1:{refusing.port}/"], str(tmp_path), "ws").deliver([event()]).problems == []
        assert len(refusing.received) == MAX_TRIES
    finally:
        refusing.close()


def test_a_dead_receiver_costs_a_problem_line_not_the_loop(tmp_path: Path) -> None:
    url = f"jsons://argus:{SECRET}@127.0.0.1:{closed_port()}/{SECRET}?-token={SECRET}"
    notifier = Notifier([url], str(tmp_path), "ws")
    started = time.monotonic()
    problems = notifier.deliver([event(), event("lost", "ws.x.h.1")]).problems
    assert time.monotonic() - started < 3
    assert len(problems) == 1  # the first failure leaves the rest of the channel to the next turn
    assert "not sent (try 1 of 3" in problems[0]
    assert SECRET not in "".join(problems)


def test_a_silent_receiver_holds_the_loop_no_longer_than_the_budget(tmp_path: Path) -> None:
    silent = Silent()
    try:
        notifier = Notifier([f"json://argus:{SECRET}@127.0.0.1:{silent.port}/?rto=2"], str(tmp_path), "ws",
                            budget=1.0)
        started = time.monotonic()
        problems = notifier.deliver([event(), event("stalled", "ws.y.h.1")]).problems
        assert time.monotonic() - started < 2.0
        assert problems == [f"#1 json://127.0.0.1:{silent.port}: no answer within 1 s; "
                            "its other events wait for the next turn"]
        # Still in its one send: the next turn does not start a second one beside it.
        assert notifier.deliver([event()]).problems == [
            f"#1 json://127.0.0.1:{silent.port}: still busy with an earlier send; its events wait for the next turn"]
        assert notifier.wait(timeout=10)
        [late] = notifier.deliver([]).problems
        assert "not sent (try 1 of 3" in late and SECRET not in late
    finally:
        silent.close()


def test_bad_urls_are_refused_at_start_naming_place_and_scheme_only(tmp_path: Path,
                                                                    capfd: pytest.CaptureFixture) -> None:
    urls = [f"slack://{SECRET}", f"nosuch://user:{SECRET}@host.example/", SECRET, f"json://127.0.0.1/{SECRET}"]
    with pytest.raises(NotifyError) as refused:
        Notifier(urls, str(tmp_path), "ws")
    message = str(refused.value)
    assert "--notify #1 (slack://…): not a valid Slack URL" in message
    assert "--notify #2 (nosuch://…): not a notification service apprise knows" in message
    assert "--notify #3: not a URL" in message
    assert "#4" not in message
    captured = capfd.readouterr()
    assert SECRET not in message + captured.out + captured.err  # apprise itself quotes URLs it refuses


def test_labels_show_a_host_only_where_the_service_is_a_host(tmp_path: Path) -> None:
    notifier = Notifier(["slack://T0000AAAA/B0000BBBB/cccccccccccccccccccccccc", "wecombot://wecomkey123",
                         "dingtalk://dingtoken123/", "feishu://feishutoken123", "lark://larktoken123",
                         f"mailtos://ops:{SECRET}@smtp.example.com?to=oncall@example.com",
                         "json://ops.example.com:8080/argus"], str(tmp_path), "ws")
    assert [c.label for c in notifier.channels] == [
        "#1 slack://…", "#2 wecombot://…", "#3 dingtalk://…", "#4 feishu://…", "#5 lark://…",
        "#6 mailtos://smtp.example.com:587", "#7 json://ops.example.com:8080"]


def test_the_ledger_names_files_by_hashes_and_refuses_symlinks(receiver: Receiver, tmp_path: Path) -> None:
    hostile = event(sid="../../../../tmp/x")
    notifier = Notifier([f"json://127.0.0.1:{receiver.port}/"], str(tmp_path), "ws")
    assert notifier.deliver([hostile]).problems == []
    [channel] = notifier.channels
    sent = tmp_path / ".argus" / "serve" / "ws" / "sent" / channel.id
    assert sorted(p.name for p in sent.iterdir()) == [f"{key_hash(hostile.key)}.json", f"{key_hash(hostile.key)}.tries"]
    record = json.loads((sent / f"{key_hash(hostile.key)}.json").read_text())
    assert record["key"] == hostile.key and SECRET not in json.dumps(record)

    # A job replaces the sent directory with a symlink: nothing is sent, nothing written through it.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    other = tmp_path / "other-root"
    (other / ".argus" / "serve" / "ws").mkdir(parents=True)
    os.symlink(elsewhere, other / ".argus" / "serve" / "ws" / "sent")
    [problem] = Notifier([f"json://127.0.0.1:{receiver.port}/"], str(other), "ws").deliver([event()]).problems
    assert "the ledger at" in problem
    assert list(elsewhere.iterdir()) == [] and len(receiver.received) == 1


def test_a_planted_symlink_is_no_record_of_a_send(tmp_path: Path) -> None:
    ledger = SentLedger(str(tmp_path), "ws")
    ledger.count_try("0123456789abcdef", "k", 1)
    target = tmp_path / "planted.json"
    target.write_text("{}")
    os.symlink(target, ledger.path / "0123456789abcdef" / f"{key_hash('k')}.json")
    assert not ledger.was_sent("0123456789abcdef", "k")
    ledger.record_sent("0123456789abcdef", "k", "failed", "t", "#1 json://h", "t")
    assert ledger.was_sent("0123456789abcdef", "k") and target.read_text() == "{}"
    with pytest.raises(ValueError):
        SentLedger(str(tmp_path), "../ws")


def test_urls_from_the_environment_keep_tokens_off_the_command_line(receiver: Receiver, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARGUS_NOTIFY", f"json://127.0.0.1:{receiver.port}/a  slack://T0000AAAA/B0000BBBB/{'c' * 24}")
    notifier = Notifier(["env:ARGUS_NOTIFY"], str(tmp_path), "ws")
    assert [c.label for c in notifier.channels] == [f"$ARGUS_NOTIFY#1 json://127.0.0.1:{receiver.port}",
                                                    "$ARGUS_NOTIFY#2 slack://…"]
    with pytest.raises(NotifyError, match=r"--notify #2 env:NOT_SET: the environment variable NOT_SET holds no URL"):
        Notifier([f"json://127.0.0.1:{receiver.port}/a", "env:NOT_SET"], str(tmp_path), "ws")


def test_a_reason_quoted_from_apprise_has_the_url_cut_out() -> None:
    password = "p@ss/w0rd!" + SECRET  # given URL-encoded; a log line may quote it either way
    [mail] = channels([f"mailtos://ops:{quote(password, safe='')}@smtp.example.com?to=oncall@example.com"])
    said = f"login as ops with {password} failed; url mailtos://ops:{quote(password, safe='')}@smtp.example.com"
    cut = scrub(said, mail.secrets)
    assert cut == "login as ops with *** failed; url mailtos://***"
    [slack] = channels([f"slack://T0000AAAA/B0000BBBB/{'c' * 24}"])
    assert scrub(f"posting to T0000AAAA/B0000BBBB/{'c' * 24} failed", slack.secrets) == "posting to ***/***/*** failed"


def test_the_documented_payload_is_what_argus_sends() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "notifications.md").read_text()
    blocks = re.findall(r"```json\n(.*?)```", doc, flags=re.S)
    envelope, parsed = json.loads(blocks[0]), json.loads(blocks[1])
    documented = Event.model_validate({k: v for k, v in parsed.items() if k != "argus_event_version"})
    assert payload(documented) == parsed == json.loads(envelope["message"])
    assert envelope["title"] == title(documented)
    assert f"```\n{title(documented)}\n\n{body(documented)}\n```" in doc  # the text for people
