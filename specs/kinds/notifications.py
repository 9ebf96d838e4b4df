"""The `notifications:` section of argus.yaml: routes from events to apprise URLs, and message templates.

Modelled on Argo CD Notifications: a route is a trigger (which events: by kind and job) and a
subscription (where to: `to`) in one, and a template says what people read. Every route an event
matches sends it (as every Argo CD subscription does), down to the first matching route that says
`stop: true` (then the routes below it do not: "everything else" is a catch-all after it);
`argus serve --notify URL` is one more route that matches everything. A workspace's routes see its
own events only (its job names and logs are its team's): routing by workspace is which argus.yaml a
route is written in.

The section is in git, where a pull request writes, and an apprise URL carries its service's token.
So `to` holds only references, `${env:NAME}` or a file's path, resolved by `argus serve` alone; the
name must say it holds a notification URL (notify or webhook in it), so that no spec can point the
loop's events at another secret of its machine. A template substitutes the event's fields (`${job}`)
and nothing else: no expressions, no filters, no attribute access. Pure.
"""

from __future__ import annotations

import fnmatch
import re
import string
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, StringConstraints, field_validator, model_validator

from specs.base import Frozen

EVENT_KINDS = ("failed", "retried", "recovered", "lost", "pending", "stalled", "drift", "apply_failed", "preempted",
               "deadline", "blocked", "released", "incident", "summary", "idle")
EventKind = Literal["failed", "retried", "recovered", "lost", "pending", "stalled", "drift", "apply_failed",
                    "preempted", "deadline", "blocked", "released", "incident", "summary", "idle"]

TEMPLATE_FIELDS = ("kind", "key", "workspace", "summary", "time", "job", "cluster", "submission_id", "status",
                   "attempt", "max_attempts", "failure", "evidence", "advice", "next", "commit", "commit_url",
                   "page_url", "log_url", "ended_at", "exit_code", "message")
"""What `${...}` may name: the JSON event's fields (docs/notifications.md), `evidence` as lines, and
`message`, argus's own text of the event."""

URL_REFERENCE = re.compile(r"^\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}$")
URL_VARIABLE_RULE = ("`to` names only variables whose name contains NOTIFY or WEBHOOK (like ARGUS_NOTIFY_OPS or "
                     "SLACK_WEBHOOK_URL): argus serve sends the workspace's events to what it holds, so a spec "
                     "must not be able to point them at another secret of the machine the loop runs on")
MAX_TEMPLATE = 4000
MAX_ROUTES = 32
"""Routes of one workspace: each event goes to every route it matches, so 400 routes were 400 messages an event
(and 29 s of serve's start-up)."""
MAX_TO = 8
"""Places one route sends to."""
GLOB = r"^[a-z0-9*?\[\]!-]{1,63}$"
"""A job or workspace name, with fnmatch's wildcards."""

Glob = Annotated[str, StringConstraints(pattern=GLOB)]
UrlReference = Annotated[str, AfterValidator(lambda reference: check_url_reference(reference)),
                         Field(json_schema_extra={"pattern": r"^(\$\{env:[A-Za-z_][A-Za-z0-9_]*\}|/.*|~/.*)$"})]
RouteName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9-]{0,62}$")]


URL_FILE_RULE = ("a URL file must have notify or webhook in its name (like /run/secrets/ops-notify.url): argus "
                 "serve sends the workspace's events to what it holds, so a spec must not be able to point them at "
                 "another secret file of the machine the loop runs on")


def is_url_variable(name: str) -> bool:
    upper = name.upper()
    return "NOTIFY" in upper or "WEBHOOK" in upper


def is_url_file_name(name: str) -> bool:
    return is_url_variable(name)


def check_url_reference(reference: str) -> str:
    """`${env:NAME}` or the path of a file, absolute or ~/..., never a URL: the value is not echoed, since it
    may be the URL with its token. A relative path is refused: that file would be in the workspace, in git."""
    match = URL_REFERENCE.match(reference)
    if match is not None:
        if not is_url_variable(match.group(1)):
            raise ValueError(URL_VARIABLE_RULE)
        return reference
    if reference.startswith(("/", "~/")) and "://" not in reference and reference.isprintable():
        if not is_url_file_name(reference.rsplit("/", 1)[-1]):
            raise ValueError(URL_FILE_RULE)
        return reference
    raise ValueError("an apprise URL carries its service's token, and this spec is in git: write `${env:NAME}` "
                     "(NAME with NOTIFY or WEBHOOK in it, like ARGUS_NOTIFY_OPS) and export NAME, holding the URL "
                     "(or several, separated by spaces), where argus serve runs; or give the path of a file "
                     "holding them, absolute or ~/... (like /run/secrets/ops-notify.url)")


def template_fields(text: str) -> list[str]:
    """The fields a template names; ValueError for a `$` that is neither `${field}`, `$field` nor `$$`."""
    found = []
    for match in string.Template.pattern.finditer(text):
        if match.group("invalid") is not None:
            raise ValueError(f"a lone `$` at character {match.start('invalid') + 1}: write `${{field}}` for a "
                             "field of the event, `$$` for a dollar sign")
        name = match.group("named") or match.group("braced")
        if name is not None:
            found.append(name)
    return found


def check_template(text: str) -> str:
    unknown = [name for name in template_fields(text) if name not in TEMPLATE_FIELDS]
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join('${' + name + '}' for name in dict.fromkeys(unknown))}; "
                         f"a template may use {', '.join(TEMPLATE_FIELDS)}")
    return text


class Template(Frozen):
    """What people read: `${field}` is the event's field (docs/notifications.md), `$$` a dollar sign."""

    title: str = Field(default="argus: ${summary}", max_length=300)
    body: str = Field(default="${message}", max_length=MAX_TEMPLATE)

    @field_validator("title", "body")
    @classmethod
    def _known_fields(cls, text: str) -> str:
        return check_template(text)


class Route(Frozen):
    """Events that match every filter given (an empty filter matches all) go to every URL in `to`."""

    name: RouteName
    """Part of the name of the route's ledger of sent events: renaming it sends the events of the moment again."""
    events: list[EventKind] = []
    jobs: list[Glob] = []
    """fnmatch patterns of job names (`llama-*`); an event about no job (drift of the plan,
    apply_failed) matches only a route without `jobs`."""
    to: list[UrlReference] = Field(min_length=1, max_length=MAX_TO)
    """`${env:NAME}`, or the path of a file (absolute or ~/...): holding the apprise URL (several: separated by
    whitespace)."""
    template: str | None = None
    stop: bool = Field(default=False, strict=True)
    """An event this route takes goes to no route below it (`--notify` still hears everything): a
    catch-all after it hears everything else."""

    def matches(self, kind: str, job: str | None) -> bool:
        """Each filter given matches (docs/notifications.md, Routes)."""
        if self.events and kind not in self.events:
            return False
        return not self.jobs or (job is not None and any(fnmatch.fnmatchcase(job, glob) for glob in self.jobs))


class Notifications(Frozen):
    routes: list[Route] = []
    templates: dict[RouteName, Template] = {}

    def routes_for(self, kind: str, job: str | None) -> list[str]:
        """The names of the routes an event goes to: every route it matches, down to the first that stops."""
        taken = []
        for route in self.routes:
            if route.matches(kind, job):
                taken.append(route.name)
                if route.stop:
                    break
        return taken

    @model_validator(mode="after")
    def _consistent(self) -> Notifications:
        if len(self.routes) > MAX_ROUTES:
            raise ValueError(f"{len(self.routes)} routes; a workspace has at most {MAX_ROUTES} (each event goes to "
                             "every route it matches: merge routes that send to one place with `events:` or `jobs:`)")
        names = [route.name for route in self.routes]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"route name(s) {', '.join(twice)} used twice: each route needs its own name")
        missing = sorted({r.template for r in self.routes if r.template and r.template not in self.templates})
        if missing:
            raise ValueError(f"route template(s) {', '.join(missing)} not defined under notifications.templates "
                             f"(defined: {', '.join(self.templates) or 'none'})")
        return self
