"""Secrets in the words of a command run by hand: what `argus import` must never write nor print.

A launch script or a hand-submitted entrypoint carries its secrets as `NAME=value` (an env assignment, a Hydra
override of a key that names one), as `--option value`, or as a literal token anywhere. The values found here are
left out of the spec and redacted from every line argus import prints or writes, as a last line of defence.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable

from specs.secrets.literal_secrets import find_secrets, looks_random, shannon_entropy
from specs.secrets.secret_scan import MIN_REDACTED, REDACTED, SECRET_KEY_PATTERN

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")
SECRET_WORDS = frozenset({"token", "secret", "password", "passwd", "apikey", "credential", "credentials"})
SECRET_PAIRS = frozenset({("api", "key"), ("access", "key"), ("secret", "key"), ("private", "key"), ("auth", "key")})
WEAK_WORDS = frozenset({"key", "pass", "pwd", "auth", "pat", "cred", "creds"})
"""Last words that name a secret only with a value that looks like one (`--wandb-key 3f9a...`, `+x.wandb_key=...`):
verl's own keys end in `key` too (data.prompt_key=question)."""
PLAIN_VALUES = re.compile(r"(?i)(true|false|null|none|[0-9.eE+-]*|\$\{.*\}|\$[A-Za-z_][A-Za-z0-9_]*)")
"""Values no secret is: a flag, a number, nothing, a reference (`balance_dp_token=True` is verl's, no secret)."""


def secret_name(name: str) -> bool:
    """Whether a variable or config key names a secret. An environment-style NAME (upper case) as a spec's `env:`
    judges it (SECRET_KEY_PATTERN: WANDB_API_KEY, HF_TOKEN); a lower-case config key only when its last words say
    so (hf_token, api_key, password), since verl's keys use `key` and `token` for other things (data.prompt_key,
    ppo_max_token_len_per_gpu)."""
    if name.isupper():
        return bool(SECRET_KEY_PATTERN.search(name))
    words = [w.lower() for w in _WORDS.findall(name)]
    return bool(words) and (words[-1] in SECRET_WORDS or tuple(words[-2:]) in SECRET_PAIRS)


def credential_like(value: str) -> bool:
    """A value a key generator made: 32+ hex digits (W&B's keys are 40), or long random-looking text."""
    value = value.strip("'\" ")
    return bool(re.fullmatch(r"[0-9a-fA-F]{32,}", value)) or looks_random(value) or (
        len(value) >= 24 and re.fullmatch(r"[A-Za-z0-9_+=.-]+", value) is not None and bool(re.search(r"[0-9]", value))
        and bool(re.search(r"[A-Za-z]", value)) and shannon_entropy(value) >= 4.0)


def names_secret(name: str, value: str) -> bool:
    """Whether `name` with this value is a secret: a secret's name, or a weak one (`key`) with a key-like value."""
    words = [w.lower() for w in _WORDS.findall(name)]
    return secret_name(name) or (bool(words) and words[-1] in WEAK_WORDS and credential_like(value))


def secret_assignment(word: str) -> str | None:
    """The value of `NAME=value`, `a.b.NAME=value`, `+a.NAME=value` or `--name=value` when NAME names a secret and
    the value could be one; None otherwise."""
    key, eq, value = word.partition("=")
    last = key.lstrip("+~-").rpartition(".")[2]
    if not eq or not last or not names_secret(last, value) or PLAIN_VALUES.fullmatch(value.strip("'\" ")):
        return None
    return value


def secrets_in(words: Iterable[str]) -> list[str]:
    """Every secret value in these words (argv words, `NAME=value` pairs): assignments and options whose name
    names a secret (`--hf-token VALUE` too), and literal tokens anywhere (specs.secrets.literal_secrets)."""
    found: list[str] = []
    previous = ""
    for word in words:
        value = secret_assignment(word)
        if value is not None:
            found.append(value)
        elif previous.startswith("-") and "=" not in previous and not word.startswith("-") \
                and names_secret(previous.lstrip("-").replace("-", "_"), word) and not PLAIN_VALUES.fullmatch(word):
            found.append(word)
        found += [f.secret for f in find_secrets(word)]
        previous = word
    return [value for value in found if worth_hiding(value)]


def worth_hiding(value: str) -> bool:
    """Whether a value under a secret's name is searched for elsewhere: "true" or "1" would be redacted out of
    every line."""
    return len(value) >= MIN_REDACTED and not PLAIN_VALUES.fullmatch(value.strip("'\" "))


def shell_words(text: str) -> list[str]:
    """A command line's words as a shell splits them (its own whitespace when its quoting does not close)."""
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def redact(text: str, secrets: Iterable[str]) -> str:
    """`text` with every secret replaced, longest first (one may hold another)."""
    for secret in sorted(set(secrets), key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text


def named(name: str) -> str:
    """A name as a message may show it: an identifier that is no token itself, else a placeholder."""
    return name if _IDENTIFIER.fullmatch(name) and not find_secrets(name) else "a name argus does not print"
