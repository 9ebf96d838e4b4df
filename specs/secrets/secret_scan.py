"""Literal secrets in spec files, found in every string a resource carries, all reported at once.

A secret written in a spec sits in git, in every plan and in Ray's job table. Each string of a
resource (env values, entrypoints, Hydra overrides, paths, descriptions: whatever reaches Ray, git
or a plan) is checked by value (specs.secrets.literal_secrets); a value under an `env:` key that names a
secret (WANDB_API_KEY) must be a `${env:NAME}` reference whatever it looks like. The raw YAML is
scanned, not the model, so a resource with other errors is scanned too. A diagnostic shows the
secret's shape and at most four characters of it; `redact` takes what was found out of every
other diagnostic, since some of those quote the value they are about (an invalid name, a ref).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from specs.diagnostics import Diagnostic
from specs.parse.nodes import StringAt
from specs.secrets.literal_secrets import Finding, find_secrets

SECRET_KEY_PATTERN = re.compile(r"KEY|TOKEN|SECRET|PASSWORD", re.IGNORECASE)
"""An env key that names a secret: its value must be a `${env:NAME}` reference."""
WHOLE_REFERENCE = re.compile(r"^\$\{env:[A-Za-z_][A-Za-z0-9_]*\}$")
ENV_MAPPINGS = ("env", "job_defaults.env")
REFERENCE_FIELDS = ("auth_token", "git.token")
"""Fields whose own validator refuses anything but a reference, without echoing it: not scanned twice."""
REFERENCE_PATHS = re.compile(r"^notifications\.routes\.\d+\.to\.\d+$")
"""A route's URLs: the same (specs.kinds.notifications.check_url_reference)."""
REDACTED = "<redacted>"
MIN_REDACTED = 4
"""A literal under a secret-named key shorter than this is not searched for in other messages: "1"
would be redacted out of every line number."""


def scan(strings: Iterable[StringAt], rel: str, keys: Iterable[StringAt] = ()) -> tuple[list[Diagnostic], list[str]]:
    """The diagnostics of one YAML document's literal secrets, and the values to redact elsewhere.
    `strings`: every string scalar of the document (specs.parse.nodes.Walked.strings); `keys`: its long keys."""
    found: list[Diagnostic] = []
    values: list[str] = []
    for path, line, key in keys:
        for secret in find_secrets(key):
            shown = f" ({secret.shown})" if secret.shown else ""
            where = f"{path[:len(path) - len(key)]}{REDACTED}"
            found.append(Diagnostic.in_file(rel, line, where, f"this key looks like {secret.description}{shown}: "
                                                              "a secret written in a spec sits in git and in plans",
                                            hint="remove it; no spec field or variable is named like a token"))
            values.append(secret.secret)
    for path, line, value in strings:
        if path in REFERENCE_FIELDS or REFERENCE_PATHS.match(path) or WHOLE_REFERENCE.match(value):
            continue
        secrets = find_secrets(value)
        by_key = not secrets and _secret_key(path)
        if not (secrets or by_key):
            continue
        found += [_by_value(rel, line, path, secret) for secret in secrets]
        values += [secret.secret for secret in secrets]
        if by_key:
            found.append(_by_key(rel, line, path))
            values += [value] if len(value) >= MIN_REDACTED else []
    return found, values


def redact(diagnostics: list[Diagnostic], secrets: list[str]) -> list[Diagnostic]:
    """The diagnostics with every secret found replaced, longest first (one may hold another)."""
    ordered = sorted(set(secrets), key=len, reverse=True)
    if not ordered:
        return diagnostics
    return [_redacted(d, ordered) for d in diagnostics]


def _secret_key(path: str) -> bool:
    mapping, _, key = path.rpartition(".")
    return mapping in ENV_MAPPINGS and bool(SECRET_KEY_PATTERN.search(key))


def _by_value(rel: str, line: int, path: str, secret: Finding) -> Diagnostic:
    shown = f" ({secret.shown})" if secret.shown else ""
    return Diagnostic.in_file(rel, line, path, f"this looks like {secret.description}{shown}: a secret written in "
                                               "a spec sits in git, in plans and in Ray's job table",
                              hint=_hint(path))


def _by_key(rel: str, line: int, path: str) -> Diagnostic:
    key = path.rpartition(".")[2]
    return Diagnostic.in_file(rel, line, path, f"{key} looks like a secret: write `{key}: ${{env:{key}}}` and "
                                               f"export {key} where argus applies, instead of a literal value")


def _hint(path: str) -> str:
    """How to pass this field's secret from the environment instead."""
    mapping, _, key = path.rpartition(".")
    if mapping in ENV_MAPPINGS:
        return f"write `{key}: ${{env:{key}}}` and export {key} where argus applies"
    if path == "git.url":
        return "give the token as `token: ${env:GIT_TOKEN_<HOST>}` beside the url (see the README, Secrets)"
    if path.startswith(("overrides", "entrypoint")):
        then = "`${oc.env:NAME}` in the override" if path.startswith("overrides") else "$NAME in the entrypoint"
        return f"put it in the job's `env:` as `NAME: ${{env:NAME}}`, export NAME where argus applies, and write {then}"
    return ("remove it; a job gets a secret through its `env:` as `NAME: ${env:NAME}`, with NAME exported where "
            "argus applies")


def _redacted(diagnostic: Diagnostic, secrets: list[str]) -> Diagnostic:
    message, hint, field = diagnostic.message, diagnostic.hint, diagnostic.field
    for secret in secrets:
        message = message.replace(secret, REDACTED)
        hint = hint.replace(secret, REDACTED) if hint else hint
        field = field.replace(secret, REDACTED)  # a token written as a key is in the path of its field
    if (message, hint, field) == (diagnostic.message, diagnostic.hint, diagnostic.field):
        return diagnostic
    return diagnostic.model_copy(update={"message": message, "hint": hint, "field": field})
