"""Literal secrets recognised by their value: known token shapes, URLs with a password, long random text.

A pure detector: text in, findings out. What it finds must never be shown: a Finding names its
shape and at most the first four characters, never the value (specs.secrets.secret_scan reports them).
Precision matters as much as recall, since a false positive blocks a plan: git commit ids, sha256
digests and UUIDs (hex), paths, model names and Hydra overrides must pass. Hex is never judged by
entropy for that reason; a hex secret (a W&B key) is caught by its key name instead.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

MIN_RANDOM_LENGTH = 32
"""Shorter text is judged by shape only: too many ordinary words and ids are random-looking at 20."""
ENTROPY_MARGIN = 0.5
"""Bits per character below the entropy random text of the same length has on average (4.6 at 32
characters, 5.2 at 64). With MIN_CLASS_CHANGES, calibrated on 30,000 random keys (base64, base64url,
alphanumeric, 32-64 characters: 99.2% caught) against 150,000 generated CamelCase and snake_case run
names (98.6% pass; those caught mash six or more words and numbers together without a separator)."""
MIN_CLASS_CHANGES = 0.4

_NOT_BEFORE = r"(?<![A-Za-z0-9])"
_NOT_AFTER = r"(?![A-Za-z0-9_-])"


@dataclass(frozen=True)
class Shape:
    description: str
    """What it looks like, as a message says it: "a GitHub token"."""
    pattern: re.Pattern[str]
    """Group `secret` is the part that must not be shown."""
    show_prefix: bool = True
    """Whether its first four characters may be shown (a token's prefix says what it is; a password's does not)."""


SHAPES = (
    Shape("an OpenAI-style API key",
          re.compile(_NOT_BEFORE + r"(?P<secret>sk-(?:proj-|svcacct-|admin-|ant-[a-z0-9]+-)?[A-Za-z0-9_-]{20,})"
                     + _NOT_AFTER)),
    Shape("a Hugging Face token", re.compile(_NOT_BEFORE + r"(?P<secret>hf_[A-Za-z0-9]{30,})" + _NOT_AFTER)),
    Shape("a GitHub token", re.compile(_NOT_BEFORE + r"(?P<secret>gh[pousr]_[A-Za-z0-9]{30,})" + _NOT_AFTER)),
    Shape("a GitHub token", re.compile(_NOT_BEFORE + r"(?P<secret>github_pat_[A-Za-z0-9_]{22,})" + _NOT_AFTER)),
    Shape("a Slack token",
          re.compile(_NOT_BEFORE + r"(?P<secret>xox[abposr]-[A-Za-z0-9-]{10,})" + _NOT_AFTER)),
    Shape("an AWS access key id", re.compile(r"(?<![A-Za-z0-9])(?P<secret>(?:AKIA|ASIA)[0-9A-Z]{16})(?![A-Za-z0-9])")),
    Shape("a GitLab token", re.compile(_NOT_BEFORE + r"(?P<secret>glpat-[A-Za-z0-9_-]{20,})" + _NOT_AFTER)),
    Shape("a URL with a password",
          re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:(?P<secret>(?![$%][{(A-Za-z_])[^/\s@]+)@"),
          show_prefix=False),
)
"""Known token shapes, by value. A password that is a shell variable or `${...}` is a reference, not a secret."""

_RANDOM_RUN = re.compile(r"[A-Za-z0-9+/_-]{" + str(MIN_RANDOM_LENGTH) + r",}={0,2}")
_CANDIDATE = re.compile(r"sk-|hf_|gh[pousr]_|github_pat_|xox[abposr]-|AKIA|ASIA|glpat-|:[^/\s@]+@|[A-Za-z0-9+/_-]{"
                        + str(MIN_RANDOM_LENGTH) + "}")
"""One search that every finding needs to match: most spec strings are short and let go at once."""
_HEX_LIKE = re.compile(r"^[0-9a-fA-F-]+$")
_SEPARATORS = re.compile(r"[-_/+]")
_RANDOM_TEXT = "a long random key or password"


@dataclass(frozen=True)
class Finding:
    """A literal secret in some text: what it looks like, and the value itself (never to be shown)."""

    description: str
    secret: str
    show_prefix: bool = True

    @property
    def shown(self) -> str:
        """What a message may show: its first four characters, or nothing."""
        return f"{self.secret[:4]}..." if self.show_prefix else ""


def find_secrets(text: str) -> list[Finding]:
    """Every literal secret in `text`, each once (a known shape wins over "random-looking")."""
    if not _CANDIDATE.search(text):
        return []
    found: list[Finding] = []
    for shape in SHAPES:
        for match in shape.pattern.finditer(text):
            if _plausible(shape, match["secret"]):
                found.append(Finding(shape.description, match["secret"], shape.show_prefix))
    known = [f.secret for f in found]
    for run in _random_runs(text):
        if not any(run in secret or secret in run for secret in known):
            found.append(Finding(_RANDOM_TEXT, run))
    return found


def shannon_entropy(text: str) -> float:
    """Bits per character of `text`, from its own character frequencies."""
    if not text:
        return 0.0
    counts = Counter(text).values()
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts)


def looks_random(token: str) -> bool:
    """Long, with lower and upper case and digits, jumping between them, with high entropy and few
    separators: what generated keys look like. Hex (commit ids, digests, UUIDs) never does; nor do
    names and paths, which are words joined by separators or in CamelCase."""
    if len(token) < MIN_RANDOM_LENGTH or _HEX_LIKE.match(token):
        return False
    if not (re.search(r"[a-z]", token) and re.search(r"[A-Z]", token) and re.search(r"[0-9]", token)):
        return False
    if len(_SEPARATORS.findall(token)) * 8 > len(token):  # a base64 key has one in 32, a run name one in 5
        return False
    return class_changes(token) >= MIN_CLASS_CHANGES and shannon_entropy(token) >= _random_entropy(len(token))


def class_changes(token: str) -> float:
    """How often two neighbours differ in kind (lower, upper, digit), within separator-free parts.

    Random base62 changes kind at 62% of neighbours; a CamelCase name only where a word or a number
    starts (Qwen2ForCausalLM: 31%)."""
    parts = [part for part in _SEPARATORS.split(token.rstrip("=")) if part]
    pairs = sum(len(part) - 1 for part in parts)
    changes = sum(_kind(a) != _kind(b) for part in parts for a, b in zip(part, part[1:], strict=False))
    return changes / pairs if pairs else 0.0


def _random_runs(text: str) -> list[str]:
    """Runs of base64/base64url characters judged random. A path is judged part by part: its
    directories are names, and `/mnt/...` alone would make any long path one run."""
    found = []
    for match in _RANDOM_RUN.finditer(text):
        run = match.group()
        parts = run.split("/") if run.startswith("/") or "//" in run else [run]
        found += [part for part in parts if looks_random(part)]
    return found


def _kind(char: str) -> int:
    return 0 if char.islower() else 1 if char.isupper() else 2


def _random_entropy(length: int) -> float:
    """The least entropy accepted from `length` random characters: what 62 equally likely characters
    give on average at that length (fewer samples show fewer distinct ones), less ENTROPY_MARGIN."""
    return math.log2(62) - 61 / (2 * length * math.log(2)) - ENTROPY_MARGIN


def _plausible(shape: Shape, secret: str) -> bool:
    """A token shape's prefix alone is not enough where words could follow it: sk-learn-for-beginners
    is a name. Generated tokens mix letters and digits."""
    if shape.description.startswith(("an OpenAI", "a Slack", "a GitLab")):
        body = secret.split("-", 1)[1]
        mixed = re.search(r"[0-9]", body) and re.search(r"[A-Za-z]", body)
        return bool(mixed) and len(_SEPARATORS.findall(body)) * 4 < len(body)
    return True
