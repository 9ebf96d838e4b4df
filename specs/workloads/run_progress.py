"""How far a run has come, as plain data, and the pure reading of it from the tail of the run's log.

Two line shapes are read, newest last, and nothing is required of a job:
    step:12 - actor/entropy:0.53 - ... - timing_s/step:41.2      verl's console logger (verl/utils/tracking.py
                                                                 LocalLogger: "step:N" then " - key:value" pairs;
                                                                 a Ray actor's lines carry "(TaskRunner pid=N) ")
    Training Progress:  12%|##   | 12/100 [05:01<...]          verl's tqdm bar of the trainer: its total
    argus:progress step=12 total=100 checkpoint=10 time=1700000000.5     argus's convention for any job
                                                                 (every key but step optional; docs/progress.md)

The log is written by the job, so by anyone: the text is cut to a bounded tail before it comes here, every line
is searched with str.find and short bounded patterns only (no backtracking on a hostile line), and every number
is capped (a forged step of 10**40 is no step).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Annotated, Literal

from pydantic import Field

from specs.base import Frozen

MAX_STEP = 10**12
"""No training run takes more steps: a bigger number in a log is forged or garbage, and read as none."""
MAX_ETA = 10 * 365 * 86400.0
"""An ETA beyond ten years says nothing: shown as unknown."""
MAX_DIGITS = 13
CONVENTION = "argus:progress"
VERL_STEP = "step:"
VERL_TIMING = "timing_s/step:"
TQDM = "Training Progress"
_TQDM_COUNT = re.compile(r"\|[ ]{0,8}([0-9]{1,13})/([0-9]{1,13})[ ]{0,8}\[")
"""`| 12/100 [` after verl's bar: bounded repeats of disjoint classes, linear on any line."""
_NUMBER = re.compile(r"[0-9]{1,16}(?:\.[0-9]{0,9})?(?:[eE][+-]?[0-9]{1,3})?")
Step = Annotated[int, Field(ge=0, le=MAX_STEP)]
Seconds = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class Progress(Frozen):
    """Step N of M of a running run, how fast it goes and when it should end, as argus last read its log."""

    step: Step
    """The newest step the run reported."""
    total: Annotated[int, Field(ge=1, le=MAX_STEP)] | None = None
    """The steps it will take: the job's trainer.total_training_steps, else what its log says; None: unknown."""
    rate: Annotated[float, Field(gt=0, le=1e9, allow_inf_nan=False)] | None = None
    """Steps per second over recent samples; None until two samples (or verl's timing_s/step) tell it."""
    eta_seconds: Annotated[float, Field(ge=0, le=MAX_ETA, allow_inf_nan=False)] | None = None
    """Seconds left at that rate; None when the total or the rate is unknown."""
    checkpoint_step: Step | None = None
    """The step of the last checkpoint saved whole (verl's latest_checkpointed_iteration.txt, or the convention)."""
    seen_at: Seconds
    """Epoch seconds when argus read it."""
    source: Literal["verl", "argus"] = "verl"
    """Which line shape said it: verl's console logger, or argus's convention."""

    @property
    def fraction(self) -> float | None:
        """0..1 of the way, when the total is known."""
        return None if self.total is None else min(1.0, self.step / self.total)


@dataclass(frozen=True)
class Reading:
    """What the tail of one log says, before any history or spec is added."""

    step: int
    source: Literal["verl", "argus"]
    total: int | None = None
    step_seconds: float | None = None
    """verl's timing_s/step of the newest step line."""
    checkpoint: int | None = None
    at: float | None = None
    """The convention's time= of the newest line."""
    earlier: tuple[int, float] | None = None
    """(step, time=) of the convention line before it with a smaller step: a rate without any history."""


def read_tail(text: str) -> Reading | None:
    """The newest step the tail reports, with whatever else its lines say; None when none reports one."""
    lines = text.replace("\r", "\n").split("\n")
    newest: Reading | None = None
    total: int | None = None
    wants_total = TQDM in text
    for line in reversed(lines):
        if total is None and wants_total and TQDM in line:
            total = _tqdm_total(line)
        found = _convention(line) or _verl(line) if "step" in line else None
        if found is None:
            continue
        if newest is None:
            newest = found
        elif newest.earlier is None and newest.at is not None and found.at is not None and found.step < newest.step:
            newest = _with(newest, earlier=(found.step, found.at))
        if (total is not None or not wants_total) and (newest.at is None or newest.earlier is not None):
            break  # nothing older can change the reading
    if newest is None:
        return None
    return newest if newest.total is not None or total is None else _with(newest, total=total)


def estimate(reading: Reading, total: int | None, samples: Sequence[tuple[float, int]], now: float,
             checkpoint: int | None = None) -> Progress:
    """Progress from a reading, the job's own total (its spec wins over the log) and this process's recent
    (time, step) samples of the run, oldest first, the reading's own included."""
    total = total or reading.total
    rate = rate_of(samples) or _logged_rate(reading)
    left = None if total is None or rate is None else max(0, total - reading.step) / rate
    return Progress(step=reading.step, total=total, rate=rate,
                    eta_seconds=left if left is not None and left <= MAX_ETA else None,
                    checkpoint_step=checkpoint if checkpoint is not None else reading.checkpoint,
                    seen_at=now, source=reading.source)


def rate_of(samples: Sequence[tuple[float, int]]) -> float | None:
    """Steps per second between the first sighting of the oldest step and of the newest one: a step seen on
    many turns counts from when it first appeared. None without two different steps at two times."""
    first_seen: dict[int, float] = {}
    for at, step in samples:
        first_seen.setdefault(step, at)
    if len(first_seen) < 2:
        return None
    (t0, s0), (t1, s1) = min((t, s) for s, t in first_seen.items()), max((t, s) for s, t in first_seen.items())
    return _sane_rate(s1 - s0, t1 - t0)


def _logged_rate(reading: Reading) -> float | None:
    if reading.earlier is not None and reading.at is not None:
        return _sane_rate(reading.step - reading.earlier[0], reading.at - reading.earlier[1])
    if reading.step_seconds:
        return _sane_rate(1, reading.step_seconds)
    return None


def _sane_rate(steps: float, seconds: float) -> float | None:
    if steps <= 0 or seconds <= 0:
        return None
    rate = steps / seconds
    return rate if math.isfinite(rate) and 0 < rate <= 1e9 else None


def _verl(line: str) -> Reading | None:
    """`step:N` at the start of the line or after a space or `)` (Ray's actor prefix), then ` - ` or the end."""
    at = line.find(VERL_STEP)
    while at != -1 and at > 0 and line[at - 1] not in " )":
        at = line.find(VERL_STEP, at + 1)
    if at == -1:
        return None
    step = _int(line, at + len(VERL_STEP), " -")
    if step is None:
        return None
    timing = line.find(VERL_TIMING)
    seconds = _float(line[timing + len(VERL_TIMING):timing + len(VERL_TIMING) + 40]) if timing != -1 else None
    return Reading(step=step, source="verl", step_seconds=seconds if seconds and seconds < MAX_ETA else None)


def _convention(line: str) -> Reading | None:
    at = line.find(CONVENTION)
    if at == -1:
        return None
    fields = dict(token.partition("=")[::2] for token in line[at + len(CONVENTION):at + 300].split()[:8])
    step = _int(fields.get("step", ""), 0, "")
    if step is None:
        return None
    total, checkpoint = _int(fields.get("total", ""), 0, ""), _int(fields.get("checkpoint", ""), 0, "")
    time = _float(fields.get("time", ""))
    return Reading(step=step, source="argus", total=total or None, checkpoint=checkpoint, at=time)


def _tqdm_total(line: str) -> int | None:
    at = line.find(TQDM)
    match = _TQDM_COUNT.search(line, at, at + 400)
    return _int(match.group(2), 0, "") or None if match else None


def _int(text: str, start: int, stops: str) -> int | None:
    """The decimal at text[start:], at most MAX_DIGITS digits, ending the text or at one of `stops`."""
    end = start
    while end < len(text) and end - start <= MAX_DIGITS and "0" <= text[end] <= "9":
        end += 1
    if end == start or end - start > MAX_DIGITS or (end < len(text) and text[end] not in stops):
        return None
    value = int(text[start:end])
    return value if value <= MAX_STEP else None


def _float(text: str) -> float | None:
    match = _NUMBER.match(text)
    if match is None:
        return None
    value = float(match.group(0))
    return value if math.isfinite(value) and value >= 0 else None


def _with(reading: Reading, **changes: object) -> Reading:
    return replace(reading, **changes)  # type: ignore[arg-type]
