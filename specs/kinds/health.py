"""A job's health policy (issue 38): when its run counts as idle (GPUs below a threshold for a window) or
stalled (its step not advancing for several times its own recent step time), and what argus does then.

Reviewed in git like the rest of the spec, in the spirit of dstack's `utilization_policy`. Outside the spec
hash: a change applies to the run under way, never replaces it. The detectors that read it are pure
(reconcile.plan.health); `stop` is opt-in, and refused for a `protect: true` job (specs.kinds.models.Job).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from specs.base import Frozen
from specs.duration import Duration

DEFAULT_IDLE_WINDOW = 30 * 60
MAX_IDLE_WINDOW = 2 * 3600
"""`argus serve` keeps two hours of GPU samples per run (reconcile.serve.gpu_window.WINDOW): a longer window could
never be covered, so a policy with one would never fire; it is refused instead."""
DEFAULT_STALL_FACTOR = 5.0
DEFAULT_STALL_FLOOR = 10 * 60


class IdlePolicy(Frozen):
    """GPUs below `below_percent` utilisation for all of `for` make the run `idle`."""

    below_percent: float = Field(default=10.0, ge=0, le=100)
    """Utilisation (0-100) every sample of the window must stay under for the run to count as idle."""
    window: Duration = Field(default=DEFAULT_IDLE_WINDOW, alias="for", le=MAX_IDLE_WINDOW)
    """How long the GPUs must stay under the threshold ("30m", "1h"; at most 2h, the samples `argus serve` keeps):
    the samples must cover all of it."""
    action: Literal["alert", "stop"] = "alert"
    """`alert`: an `idle` event and an incident record. `stop`: also stop the run (never a `protect: true` job)."""

    model_config = {**Frozen.model_config, "populate_by_name": True}


class StallPolicy(Frozen):
    """A run whose step has not advanced for `factor` times its recent step time (at least `floor`) is `stalled`."""

    factor: float = Field(default=DEFAULT_STALL_FACTOR, ge=1, le=1000)
    """How many of its own recent step times the run may go without a new step."""
    floor: Duration = DEFAULT_STALL_FLOOR
    """The shortest wait before a run is called stalled, however quick its steps ("10m")."""


class Health(Frozen):
    """What argus watches in a job's run beyond its status; both parts optional."""

    idle: IdlePolicy | None = None
    stall: StallPolicy | None = None

    def stops_when_idle(self) -> bool:
        return self.idle is not None and self.idle.action == "stop"
