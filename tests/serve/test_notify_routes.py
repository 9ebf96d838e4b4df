"""Routes and templates of argus.yaml's `notifications:`, with real loopback receivers (no Ray): which
route hears what, what a template says, that hostile values stay text, what counts as delivered, the
links an event carries, and that validate refuses a URL written in the spec."""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs

import pytest
from pydantic import ValidationError

from reconcile.serve.channels import NotifyError, channels
from reconcile.serve.messages import WORD_JOINER, render
from reconcile.serve.notify import Notifier
from reconcile.views.links import Links, commit_url, page_url
from specs.kinds.notifications import Notifications, Template
from tests.support.receivers import Receiver, event

SLACK_TOKEN = "xoxb-1234567890-abcdefghijklmnop"


@pytest.fixture
def receivers() -> Iterator[tuple[Receiver, Receiver]]:
    a, b = Receiver(), Receiver()
    yield a, b
    a.close()
    b.close()


def routes(text: dict) -> Notifications:
    return Notifications.model_validate(text)


def test_one_jobs_failures_go_to_a_and_everything_else_to_b(receivers, tmp_path: Path, monkeypatch) -> None:
    a, b = receivers
    monkeypatch.setenv("ARGUS_NOTIFY_A", f"json://127.0.0.1:{a.port}/a")
    monkeypatch.setenv("ARGUS_NOTIFY_B", f"json://127.0.0.1:{b.port}/b")
    notifier = Notifier([], str(tmp_path), "ws", routes=routes({"routes": [
        {"name": "train-failures", "events": ["failed", "lost"], "jobs": ["train-*"], "to": ["${env:ARGUS_NOTIFY_A}"],
         "stop": True},
        {"name": "rest", "to": ["${env:ARGUS_NOTIFY_B}"]}]}))
    sent = [event("failed", "ws.train-a.h.1", job="train-a"), event("retried", "ws.train-a.h.2", job="train-a"),
            event("failed", "ws.eval.h.1", job="eval"), event("drift", "digest", job=None)]
    outcome = notifier.deliver(sent)
    assert outcome.problems == []
    assert [e["key"] for e in a.events()] == ["ws:failed:ws.train-a.h.1"]
    assert [e["key"] for e in b.events()] == ["ws:retried:ws.train-a.h.2", "ws:failed:ws.eval.h.1", "ws:drift:digest"]
    assert sorted(e.key for _label, e in outcome.delivered) == sorted(e.key for e in sent)
    assert notifier.deliver(sent).delivered == []  # the next turn derives the same events: nothing is sent again
    assert len(a.received) == 1 and len(b.received) == 3


def test_without_stop_every_matching_route_sends_and_notify_hears_all(receivers, tmp_path: Path,
                                                                         monkeypatch) -> None:
    a, b = receivers
    monkeypatch.setenv("ARGUS_NOTIFY_A", f"json://127.0.0.1:{a.port}/a")
    notifier = Notifier([f"json://127.0.0.1:{b.port}/all"], str(tmp_path), "ws", routes=routes({"routes": [
        {"name": "failures", "events": ["failed"], "to": ["${env:ARGUS_NOTIFY_A}"], "stop": True},
        {"name": "also-failures", "events": ["failed"], "to": ["${env:ARGUS_NOTIFY_A}"]}]}))
    assert notifier.deliver([event("failed"), event("pending", "ws.p.h.1")]).problems == []
    assert [e["kind"] for e in a.events()] == ["failed"]  # `stop` kept it from the second route
    assert [e["kind"] for e in b.events()] == ["failed", "pending"]  # --notify is outside the routes


def test_editing_a_route_keeps_its_ledger_and_renaming_makes_a_new_one(receivers, tmp_path: Path,
                                                                        monkeypatch) -> None:
    a, _b = receivers
    monkeypatch.setenv("ARGUS_NOTIFY_A", f"json://127.0.0.1:{a.port}/a")
    first = {"name": "ops", "events": ["failed"], "to": ["${env:ARGUS_NOTIFY_A}"]}
    assert Notifier([], str(tmp_path), "ws", routes=routes({"routes": [first]})).deliver([event()]).problems == []
    edited = {**first, "events": ["failed", "lost"], "jobs": ["*"], "template": "short"}
    again = Notifier([], str(tmp_path), "ws", routes=routes({"routes": [edited],
                                                             "templates": {"short": {"title": "${job}"}}}))
    assert again.deliver([event()]).delivered == [] and len(a.received) == 1
    renamed = Notifier([], str(tmp_path), "ws", routes=routes({"routes": [{**first, "name": "oncall"}]}))
    assert len(renamed.deliver([event()]).delivered) == 1 and len(a.received) == 2
    # a --notify URL's ledger id is the URL's alone, as before routes existed: upgrading resends nothing
    [plain_channel] = channels([f"json://127.0.0.1:{a.port}/a"])
    assert plain_channel.id not in {c.id for c in again.channels}


def test_a_route_whose_variable_is_unset_is_an_error_at_start(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("ARGUS_NOTIFY_NOWHERE", raising=False)
    monkeypatch.setenv("ARGUS_NOTIFY_BAD", f"slack://{SLACK_TOKEN}/#ops nonsense://x")
    with pytest.raises(NotifyError) as raised:
        Notifier([], str(tmp_path), "ws", routes=routes({"routes": [
            {"name": "ops", "to": ["${env:ARGUS_NOTIFY_NOWHERE}", "${env:ARGUS_NOTIFY_BAD}"]}]}))
    said = str(raised.value)
    assert ("route ops: to #1 env:ARGUS_NOTIFY_NOWHERE: the environment variable ARGUS_NOTIFY_NOWHERE "
            "holds no URL") in said
    assert "route ops $ARGUS_NOTIFY_BAD#2 (nonsense://…): not a notification service" in said
    assert SLACK_TOKEN not in said and "xoxb" not in said


def test_a_template_renders_the_events_fields_and_links(receivers, tmp_path: Path, monkeypatch) -> None:
    a, _b = receivers
    monkeypatch.setenv("ARGUS_NOTIFY_CHAT", f"form://127.0.0.1:{a.port}/chat")
    template = {"title": "${job} ${kind} (exit ${exit_code})", "body": "class ${failure} at ${ended_at}\n"
                "log ${log_url}\ncommit ${commit_url}\npage ${page_url}\nattempt ${attempt}/${max_attempts} $$5"}
    notifier = Notifier([], str(tmp_path), "ws", routes=routes({
        "routes": [{"name": "chat", "to": ["${env:ARGUS_NOTIFY_CHAT}"], "template": "short"}],
        "templates": {"short": template}}))
    notifier.links = Links(page_url="https://argus.example.com/", remote="git@github.com:acme/t.git")
    failed = event(exit_code=3, ended_at="2027-01-15T08:00:00Z", commit="0123456789abcdef")
    assert notifier.deliver([failed]).problems == []
    form = {k: v[0] for k, v in parse_qs(a.received[0]["body"]).items()}
    assert form["title"] == "[ws] train failed (exit 3)"  # argus names the workspace, whatever the template says
    assert form["message"] == ("class nccl_timeout at 2027-01-15T08:00:00Z\n"
                               "log https://argus.example.com/logs/ws.train.h.1\n"
                               "commit https://github.com/acme/t/commit/0123456789abcdef\n"
                               "page https://argus.example.com/\nattempt 1/3 $5\n\n"
                               "(sent by argus serve for workspace ws)")


def test_a_json_route_gets_the_whole_event_with_links_and_the_templates_title(receivers, tmp_path: Path,
                                                                              monkeypatch) -> None:
    a, _b = receivers
    monkeypatch.setenv("ARGUS_WEBHOOK", f"json://127.0.0.1:{a.port}/hook")
    notifier = Notifier([], str(tmp_path), "ws", routes=routes({
        "routes": [{"name": "hook", "to": ["${env:ARGUS_WEBHOOK}"], "template": "t"}],
        "templates": {"t": {"title": "argus ${kind}: ${job}", "body": "ignored for JSON"}}}))
    notifier.links = Links(page_url="http://127.0.0.1:9108/")
    assert notifier.deliver([event(exit_code=None)]).problems == []
    outer = json.loads(a.received[0]["body"])
    sent = json.loads(outer["message"])
    assert outer["title"] == "[ws] argus failed: train"
    assert (sent["page_url"], sent["log_url"]) == ("http://127.0.0.1:9108/", "http://127.0.0.1:9108/logs/ws.train.h.1")
    assert sent["exit_code"] is None and sent["ended_at"] is None and sent["commit_url"] is None


HOSTILE = ("<!channel> @here [click](https://evil.example/x) <https://evil.example|your run> ${page_url} "
           "\x1b[31mred\x1b[0m <img src=x onerror=alert(1)>")


def test_a_hostile_value_cannot_mention_link_or_substitute(receivers, tmp_path: Path, monkeypatch) -> None:
    a, _b = receivers
    monkeypatch.setenv("ARGUS_NOTIFY_CHAT", f"form://127.0.0.1:{a.port}/chat")
    notifier = Notifier([], str(tmp_path), "ws", routes=routes({
        "routes": [{"name": "chat", "to": ["${env:ARGUS_NOTIFY_CHAT}"], "template": "t"}],
        "templates": {"t": {"title": "${summary}", "body": "said: ${next}\n${evidence}\n---\n${message}"}}}))
    notifier.links = Links(page_url="https://argus.example.com/")
    hostile = event(next=HOSTILE, evidence=(HOSTILE,)).model_copy(update={"summary": HOSTILE})
    assert notifier.deliver([hostile]).problems == []
    form = {k: v[0] for k, v in parse_qs(a.received[0]["body"]).items()}
    for text in (form["title"], form["message"]):
        assert "<" not in text and ">" not in text and "\x1b" not in text
        assert "@here" not in text and "](" not in text and f"@{WORD_JOINER}here" in text
        assert "${page_url}" in text  # one pass: a value that looks like a field stays text
    assert form["message"].count("‹!channel›") == 4  # next and evidence, and both again in argus's own text


def test_render_is_one_pass_and_empty_for_a_fact_the_event_lacks() -> None:
    title, body = render(Template(title="${job}/${exit_code}/${commit_url}", body="${cluster}"),
                         event(job="x", cluster="${workspace}"))
    assert (title, body) == ("[ws] x//", "${workspace}\n\n(sent by argus serve for workspace ws)")


def test_what_a_dead_receiver_did_not_take_is_not_delivered(receivers, tmp_path: Path, monkeypatch) -> None:
    a, _b = receivers
    with socket.create_server(("127.0.0.1", 0)) as sock:
        closed = sock.getsockname()[1]
    monkeypatch.setenv("ARGUS_NOTIFY_UP", f"json://127.0.0.1:{a.port}/up")
    monkeypatch.setenv("ARGUS_NOTIFY_DOWN", f"json://127.0.0.1:{closed}/down?rto=1&cto=1")
    notifier = Notifier([], str(tmp_path), "ws", routes=routes({"routes": [
        {"name": "up", "to": ["${env:ARGUS_NOTIFY_UP}"]}, {"name": "down", "to": ["${env:ARGUS_NOTIFY_DOWN}"]}]}))
    outcome = notifier.deliver([event()])
    assert [label for label, _e in outcome.delivered] == ["route up $ARGUS_NOTIFY_UP#1 json://127.0.0.1:" + str(a.port)]
    [problem] = outcome.problems
    assert problem.startswith(f"route down $ARGUS_NOTIFY_DOWN#1 json://127.0.0.1:{closed}: event ws:failed:")


@pytest.mark.parametrize(("remote", "base"), [
    ("https://github.com/acme/training.git", "https://github.com/acme/training/commit/"),
    ("https://oauth2:glpat-abcdefghijklmnopqrst@gitlab.com/acme/ml/training", "https://gitlab.com/acme/ml/training/-/commit/"),
    ("git@github.com:acme/training.git", "https://github.com/acme/training/commit/"),
    ("ssh://git@bitbucket.org/acme/training.git", "https://bitbucket.org/acme/training/commits/"),
    ("https://git.internal:8443/team/repo", None),  # a host argus does not know the commit page of
    ("git@git.internal:team/repo.git", None),  # an ssh host whose web form argus cannot know
    ("/srv/git/repo.git", None), ("file:///srv/git/repo", None), ("https://github.com/", None),
    ("https://github.com/a/b\"><script>", None), (None, None)])
def test_a_commit_link_is_made_only_for_a_web_host_without_credentials(remote: str | None, base: str | None) -> None:
    commit = "0123456789abcdef0123456789abcdef01234567"
    assert commit_url(remote, commit) == (base and base + commit)


def test_the_page_is_the_public_url_or_where_the_serve_listens() -> None:
    assert page_url("https://argus.example.com/ops", "127.0.0.1", 9108) == "https://argus.example.com/ops/"
    assert page_url(None, "127.0.0.1", 9108) == "http://127.0.0.1:9108/"
    assert page_url(None, "::1", 9108) == "http://[::1]:9108/"
    linked = Links(page_url="http://h:1/", remote="https://github.com/a/b").add(
        event(commit="not a commit; <script>"))
    assert linked.commit_url is None and linked.log_url == "http://h:1/logs/ws.train.h.1"


def test_validate_refuses_a_url_in_argus_yaml_at_its_line_without_showing_it(tmp_path: Path, argus) -> None:
    (tmp_path / "argus.yaml").write_text(
        "kind: Workspace\nname: team\nnotifications:\n  routes:\n    - name: ops\n      to:\n"
        f"        - slack://{SLACK_TOKEN}/#ops\n        - ${{env:ARGUS_NOTIFY_OPS}}\n"
        "    - name: sneaky\n      to: ['${env:GITHUB_TOKEN}']\n      template: short\n"
        "  templates:\n    short: {title: '${job} ${password}'}\n")
    (tmp_path / "cluster.yaml").write_text("kind: Cluster\nname: local\naddress: http://127.0.0.1:8265\n"
                                           f"shared_root: {tmp_path / 'shared'}\n")
    done = argus("validate", tmp_path)
    said = done.out + done.err
    assert done.code == 1
    assert "argus.yaml:7: notifications.routes.0.to.0" in said and "write `${env:NAME}`" in said
    assert "argus.yaml:10: notifications.routes.1.to.0" in said and "NOTIFY or WEBHOOK" in said
    assert "argus.yaml:13: notifications.templates.short.title" in said and "${password}" in said
    assert SLACK_TOKEN not in said and "xoxb" not in said
    assert not (tmp_path / "shared").exists()  # nothing half-written


def test_a_route_reads_its_urls_from_a_file_named_for_them(receivers, tmp_path: Path) -> None:
    a, _b = receivers
    good = tmp_path / "ops-notify.url"
    good.write_text(f"json://127.0.0.1:{a.port}/file\n")
    secret = tmp_path / "credentials"
    secret.write_text(f"slack://{SLACK_TOKEN}/#ops\n")
    (tmp_path / "link-notify.url").symlink_to(secret)
    notifier = Notifier([], str(tmp_path), "ws", routes=routes({"routes": [{"name": "ops", "to": [str(good)]}]}))
    assert notifier.deliver([event()]).problems == [] and [e["kind"] for e in a.events()] == ["failed"]
    with pytest.raises(NotifyError) as raised:
        Notifier([], str(tmp_path), "ws", routes=routes({"routes": [
            {"name": "ops", "to": [str(tmp_path / "link-notify.url"), str(tmp_path / "gone-notify.url")]}]}))
    said = str(raised.value)
    assert "link-notify.url: a link to a file of another name" in said and "gone-notify.url: cannot be read" in said
    assert SLACK_TOKEN not in said and "xoxb" not in said


@pytest.mark.parametrize(("reference", "why"), [
    ("hooks/notify.url", "write `${env:NAME}`"), ("/etc/argus/credentials", "notify or webhook in its name"),
    ("~/.git-credentials", "notify or webhook in its name"), ("json://127.0.0.1/notify", "write `${env:NAME}`")])
def test_a_route_names_only_references_to_notification_urls(reference: str, why: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(why)) as raised:
        routes({"routes": [{"name": "ops", "to": [reference]}]})
    [error] = raised.value.errors()
    assert error["loc"] == ("routes", 0, "to", 0) and reference not in error["msg"]  # what validate prints


def test_a_fifo_named_as_a_url_file_is_refused_without_waiting(tmp_path: Path) -> None:
    fifo = tmp_path / "ops-notify.url"
    os.mkfifo(fifo)
    with pytest.raises(NotifyError, match="ops-notify.url: not a regular file"):
        Notifier([], str(tmp_path), "ws", routes=routes({"routes": [{"name": "ops", "to": [str(fifo)]}]}))


def test_routes_are_capped_and_a_template_cannot_pass_for_another_workspace(tmp_path: Path) -> None:
    """Issue 37: 400 routes were 400 messages an event; a template could speak as another team."""
    import pytest
    from pydantic import ValidationError

    many = [{"name": f"r{n}", "to": ["${env:ARGUS_NOTIFY_X}"]} for n in range(33)]
    with pytest.raises(ValidationError, match="33 routes; a workspace has at most 32"):
        routes({"routes": many})
    with pytest.raises(ValidationError, match="at most 8"):
        routes({"routes": [{"name": "r", "to": ["${env:ARGUS_NOTIFY_X}"] * 9}]})
    title, body = render(Template(title="[vision] vision's job failed", body="from the vision team"),
                         event(job="x"))
    assert title.startswith("[ws] ") and body.endswith("(sent by argus serve for workspace ws)")
