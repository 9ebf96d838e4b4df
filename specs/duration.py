"""Durations in specs: "90m", "2h", "1h30m", "45s", "1d", or a whole number of seconds."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator, WithJsonSchema

UNITS = {"d": 86_400, "h": 3_600, "m": 60, "s": 1}
MAX_SECONDS = 366 * 86_400
"""A year and a day: longer than any run a limit is meant for, and small enough to stay exact as a float."""
PATTERN = r"^(?:[0-9]+d)?(?:[0-9]+h)?(?:[0-9]+m)?(?:[0-9]+s)?$"
"""Units in this order, each at most once: "1h30m", never "30m1h" or "1h1h"."""
RULE = 'a duration like "45s", "90m", "2h", "1h30m" or "1d", or a whole number of seconds, from 1 s to 366 days'


def parse_duration(value: Any) -> int:
    """Seconds in `value`; a ValueError that says what is accepted for anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):  # True is an int to Python, not a duration
        raise ValueError(f"must be {RULE}")
    seconds = value if isinstance(value, int) else _seconds_in(value.strip())
    if not 1 <= seconds <= MAX_SECONDS:
        raise ValueError(f"{value!r} is out of range: must be {RULE}")
    return seconds


def _seconds_in(text: str) -> int:
    if text.isdigit():
        return int(text[:12])  # a long run of digits is out of range anyway: never parse thousands of them
    if not text or len(text) > 40 or not re.fullmatch(PATTERN, text):
        raise ValueError(f"{text[:40]!r} is not {RULE}")
    return sum(int(amount[:12]) * UNITS[unit] for amount, unit in re.findall(r"([0-9]+)([dhms])", text))


def shown(seconds: float) -> str:
    """Seconds as people write them back: 5400 -> "1h30m", 45 -> "45s"."""
    rest, parts = int(seconds), []
    for unit, size in UNITS.items():
        if rest >= size:
            parts.append(f"{rest // size}{unit}")
            rest %= size
    return "".join(parts) or "0s"


Duration = Annotated[int, BeforeValidator(parse_duration), WithJsonSchema({
    "anyOf": [{"type": "integer", "minimum": 1, "maximum": MAX_SECONDS},
              {"type": "string", "pattern": r"^(?=.)(?:[0-9]+d)?(?:[0-9]+h)?(?:[0-9]+m)?(?:[0-9]+s)?$"}]})]
"""Seconds, however the spec wrote them."""
