"""What a notification says: text for people, the versioned JSON event for programs. Pure.

docs/notifications.md documents both; a change to the JSON event's shape that a receiver could
trip on (a field renamed, removed or retyped) bumps PAYLOAD_VERSION. New fields do not.
"""

from __future__ import annotations

import json
import re
import string

from reconcile.report import Event
from specs.diagnostics import plain
from specs.kinds.notifications import TEMPLATE_FIELDS, Template

PAYLOAD_VERSION = 1
"""`argus_event_version` in every JSON event."""

SEVERITY = {"failed": "failure", "lost": "failure", "apply_failed": "failure", "stalled": "warning",
            "pending": "warning", "drift": "warning", "retried": "info", "recovered": "success",
            "preempted": "warning", "deadline": "warning", "blocked": "warning", "released": "info",
            "incident": "failure", "summary": "info", "idle": "warning"}
"""Event kind -> apprise's notify type (colour and icon in chat; `type` in a JSON webhook)."""

MAX_EVIDENCE_LINES = 12
MAX_LINE = 400
"""Evidence shown to people: chat services cut long messages (WeCom at 2048 characters), and the
lines that made the class come first. The JSON event carries all of it."""


WORD_JOINER = "\u2060"
"""Invisible, and not a word character: `@\u2060here` mentions nobody, `]\u2060(` links nowhere."""
MENTION = re.compile(r"@(?=[\w!])")
LINK = re.compile(r"\](?=\()")
ANGLES = str.maketrans({"<": "\u2039", ">": "\u203a"})
"""Slack's `<!channel>` and `<url|text>`, Discord's `<@id>`, an HTML tag: none is one with ‹ and ›."""


def neutral(text: str, lines: bool = True) -> str:
    """Text from outside argus as a chat service shows it, whatever the service parses: no escape
    sequences (plain), no @-mention, no `<...>` control sequence or tag, no markdown link. Sent as
    TEXT too; services that parse text anyway (mentions in Discord, Mattermost) meet nothing to act on."""
    text = plain(text, lines=lines).translate(ANGLES)
    return LINK.sub("]" + WORD_JOINER, MENTION.sub("@" + WORD_JOINER, text))


def title(event: Event) -> str:
    return neutral(f"argus: {event.summary}", lines=False)


def body(event: Event) -> str:
    """The event for people, one fact a line, only the facts it has."""
    lines = [f"kind: {event.kind}", f"workspace: {event.workspace}"]
    if event.job:
        lines.append(f"job: {event.job}" + (f" on cluster {event.cluster}" if event.cluster else ""))
    if event.submission_id:
        lines.append(f"run: {event.submission_id}")
    if event.failure:
        lines.append(f"class: {event.failure}")
    lines += _evidence(event.evidence)
    if event.advice:
        lines.append(f"advice: {event.advice}")
    if event.attempt is not None:
        lines.append(f"attempt: {_attempt(event)}")
    if event.next:
        lines.append(f"next: {event.next}")
    if event.exit_code is not None:
        lines.append(f"exit code: {event.exit_code}")
    if event.ended_at:
        lines.append(f"ended: {event.ended_at}")
    if event.commit:
        lines.append(f"commit: {event.commit[:12]}" + (f" {event.commit_url}" if event.commit_url else ""))
    lines += [f"{name}: {value}" for name, value in sorted(event.details.items())]
    if event.report and event.submission_id:
        lines.append(f"report: `argus status --run {event.submission_id}` (the scene is kept in its run directory)")
    lines += [f"{name}: {url}" for name, url in (("log", event.log_url), ("page", event.page_url)) if url]
    lines.append(f"time: {event.time}")
    return neutral("\n".join(lines))  # an error or log line quoted from Ray: no escape reaches a chat client


def payload(event: Event) -> dict[str, object]:
    """The JSON event: every field of the Event, plus its version."""
    return {"argus_event_version": PAYLOAD_VERSION, **event.model_dump(mode="json")}


def payload_text(event: Event) -> str:
    return json.dumps(payload(event), sort_keys=True, separators=(",", ":"))


def _attempt(event: Event) -> str:
    return f"{event.attempt} of {event.max_attempts}" if event.max_attempts else str(event.attempt)


def _evidence(evidence: tuple[str, ...]) -> list[str]:
    if not evidence:
        return []
    shown = [f"  {_cut(line)}" for line in evidence[:MAX_EVIDENCE_LINES]]
    hidden = len(evidence) - len(shown)
    more = [f"  ({hidden} more line(s) in the run's record)"] if hidden else []
    return ["evidence:", *shown, *more]


def _cut(line: str) -> str:
    return line if len(line) <= MAX_LINE else line[: MAX_LINE - 3] + "..."


def render(template: Template, event: Event) -> tuple[str, str]:
    """(title, body) of a route's template: each `${field}` the event's value, made neutral; the template's
    own text is the workspace's (in git, reviewed), so it may say what it likes, but argus's words around it
    say which workspace sent it. One pass: a value holding `${...}` stays text."""
    values = template_values(event)
    title_values = {name: value.replace("\n", " ") for name, value in values.items()}
    # argus, not the template, names the workspace: one team's route must not pass as another's
    return (f"[{event.workspace}] " + string.Template(plain(template.title, lines=False)).safe_substitute(title_values),
            string.Template(plain(template.body)).safe_substitute(values) + f"\n\n{signature(event)}")


def signature(event: Event) -> str:
    return f"(sent by argus serve for workspace {event.workspace})"


def template_values(event: Event) -> dict[str, str]:
    dumped = event.model_dump(mode="json")
    values = {name: "" if dumped.get(name) is None else str(dumped[name]) for name in TEMPLATE_FIELDS}
    values["evidence"] = "\n".join(_cut(line) for line in event.evidence[:MAX_EVIDENCE_LINES])
    values = {name: neutral(value) for name, value in values.items()}
    values["message"] = body(event)  # neutral already
    return values
