"""Pure detectors of a run's health (issue 38): idle from GPU utilisation samples, stalled from its step
history, each against the job's policy (specs.kinds.health). No clock, no I/O: the caller gives `now` and the
samples (the GPU and progress readers gather them), so the same inputs always give the same answer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from reconcile.plan.registry import holds
from specs.desired import DesiredState
from specs.kinds.health import Health, IdlePolicy, StallPolicy
from specs.kinds.models import Retry
from state.observed import ObservedState

MAX_GAP_SHARE = 0.25
"""The longest gap between two GPU samples an idle window may hold, as a share of the window: beyond it, the
samples do not cover the window (a 30 min window tolerates 7.5 min without a sample: fifteen missed turns)."""
MIN_GAP = 3.0
"""Seconds of gap always tolerated: a turn a little late is no hole in the samples."""
RECENT_STEPS = 5
"""Step intervals a run's "recent step time" is the median of: enough to smooth one slow step (a
checkpoint save, a validation pass), few enough to follow a run that changes pace."""


def idle(samples: Sequence[tuple[float, float]], now: float, policy: IdlePolicy) -> bool:
    """Whether every utilisation sample (time, percent) of the last `policy.window` seconds is below
    `policy.below_percent`, and the samples cover the window: one from its start or before, two or more within it,
    and no gap between two of them (or to now) longer than MAX_GAP_SHARE of the window or twice the samples' own
    pace (at least MIN_GAP). A run watched for less
    than the window, or whose GPUs went unread for a while (a cluster that did not answer), is not called idle
    on a guess: what it did meanwhile is unknown."""
    start = now - float(policy.window)
    before = [t for t, _ in samples if t <= start]
    within = sorted((t, u) for t, u in samples if start < t <= now)
    if not before or not within:
        return False
    last_before = max(before)
    at_start = [u for t, u in samples if t == last_before]
    times = [last_before, *(t for t, _ in within), now]
    gaps = sorted(b - a for a, b in zip(times, times[1:], strict=False))
    cadence = gaps[len(gaps) // 2]  # the loop's own pace: a gap well beyond it is a hole, however long the window
    if len(within) < 2 or gaps[-1] > max(MAX_GAP_SHARE * float(policy.window), 2 * cadence, MIN_GAP):
        return False
    return all(u < policy.below_percent for u in (*at_start, *(u for _, u in within)))


def idle_runs(desired: DesiredState, observed: ObservedState, samples: Mapping[str, Sequence[tuple[float, float]]],
              now: float) -> dict[str, str]:
    """Submission id -> job of this workspace's running runs whose job has a `health.idle` policy and whose GPU
    samples (time, mean utilisation %) say idle over its whole window."""
    found = {}
    listed = Counter(job.submission_id for cluster in observed.clusters.values() for job in cluster.jobs)
    for name, cluster in observed.clusters.items():
        for job in cluster.jobs:
            run, spec = job.run_id, None
            if run is not None and run.workspace == desired.workspace.name and job.status == "RUNNING" \
                    and listed[job.submission_id] == 1 and holds(observed, name, job.submission_id):
                spec = desired.jobs.get(run.job)  # samples are by id: an impostor elsewhere would share them
            policy = spec.health.idle if spec is not None and spec.health is not None else None
            if policy is not None and idle(samples.get(job.submission_id, ()), now, policy):
                found[job.submission_id] = run.job
    return found


def stalled(steps: Sequence[tuple[float, int]], now: float, policy: StallPolicy) -> bool:
    """Whether the run's step has not advanced for `policy.factor` times its recent step time (the median
    of its last RECENT_STEPS step intervals), and for at least `policy.floor` seconds. A run with fewer
    than two steps has no step time of its own: only the floor applies, from its first step."""
    advances = _advances(steps)
    if not advances:
        return False
    last = advances[-1][0]
    intervals = [b[0] - a[0] for a, b in zip(advances, advances[1:], strict=False) if b[0] > a[0]]
    recent = sorted(intervals[-RECENT_STEPS:])
    step_time = recent[len(recent) // 2] if recent else 0.0
    return now - last > max(policy.factor * step_time, float(policy.floor))


def last_advance(steps: Sequence[tuple[float, int]]) -> float:
    """When the run's step last reached a new high (the first sample's time when it never moved)."""
    advances = _advances(steps)
    return advances[-1][0] if advances else min((t for t, _ in steps), default=0.0)


def _advances(steps: Sequence[tuple[float, int]]) -> list[tuple[float, int]]:
    """The (time, step) points at which the step first reached a new high, in time order: a step seen
    again (a log line repeated, a run resumed from a checkpoint) is no progress."""
    found: list[tuple[float, int]] = []
    for when, step in sorted(steps):
        if not found or step > found[-1][1]:
            found.append((when, step))
    return found


def next_step(kind: str, failure: str | None, attempt: int, retry: Retry | None,
              health: Health | None) -> tuple[str, str]:
    """What argus does about an interrupted run, as (action, words): `retry`, `stop`, `wait` or `nothing`.
    The same rule as the loop's (reconcile.serve.events._next): a failed run is retried only when its class
    is in the job's retry.on and attempts remain; an idle run is stopped only with `action: stop`."""
    if kind == "idle":
        if health is not None and health.stops_when_idle():
            return "stop", "stops it (the job's health.idle.action is `stop`), freeing its GPUs"
        return "wait", "nothing but tell: the job's health.idle.action is `alert`; the run goes on"
    if kind == "stalled":
        return "wait", "nothing but tell: a stalled run is left running (`argus apply --replace job.NAME` stops it)"
    if retry is None:
        return "nothing", "nothing: the job has no retry policy; fix it and push, or `argus apply --replace job.NAME`"
    if (failure or "unknown") not in retry.on:
        return "nothing", f"nothing: {failure or 'unknown'} is not in the job's retry.on"
    if attempt >= retry.max_attempts:
        return "nothing", f"nothing: attempt {attempt} of {retry.max_attempts} was the last"
    return "retry", f"retries it as attempt {attempt + 1} of {retry.max_attempts}, from its checkpoint directory"
