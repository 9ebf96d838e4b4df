"""Why a run failed: one table of rules over Ray's error type, exit code, message and log tail.

The first matching rule wins, so the specific classes come before the catch-alls. Retry policies
(`retry.on`) name these classes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FAILURE_CLASSES = ("oom", "nccl_timeout", "node_lost", "config_error", "import_error", "runtime_env_setup",
                   "start_timeout", "user_code", "stopped", "unknown", "lost")
NEVER_RETRIED = frozenset({"config_error", "import_error", "user_code", "stopped"})
"""Running these again gives the same failure: a retry policy may not name them."""


@dataclass(frozen=True)
class Evidence:
    status: str
    error_type: str = ""
    exit_code: int | None = None
    message: str = ""
    log_tail: str = ""


@dataclass(frozen=True)
class Rule:
    failure: str
    error_types: tuple[str, ...] = ()
    message: str | None = None
    log: str | None = None
    exit_codes: tuple[int, ...] = ()

    def matches(self, e: Evidence) -> bool:
        return (e.error_type in self.error_types
                or bool(self.message and re.search(self.message, e.message, re.IGNORECASE))
                or bool(self.log and re.search(self.log, e.log_tail, re.IGNORECASE | re.MULTILINE))
                or (e.exit_code is not None and e.exit_code in self.exit_codes))


RULES = (
    Rule("start_timeout", error_types=("JOB_SUPERVISOR_ACTOR_START_TIMEOUT",),
         message=r"failed to start within|not schedulable|insufficient resources"),
    Rule("runtime_env_setup", error_types=("RUNTIME_ENV_SETUP_FAILURE",), message=r"runtime_env setup failed|"
         r"runtime env setup"),
    Rule("oom", log=r"OutOfMemoryError|CUDA out of memory|Memory on the node .* was \d+\.\d+GB / .* exceeds|"
         r"oom-kill|Killed process \d+", exit_codes=(137, -9)),
    Rule("nccl_timeout", log=r"Watchdog caught collective operation timeout|NCCL.{0,80}time(d)? ?out|"
         r"ProcessGroupNCCL.{0,120}Timeout"),
    Rule("node_lost", error_types=("JOB_SUPERVISOR_ACTOR_DIED",), message=r"node .* (died|dead|lost)",
         log=r"node (with node id )?\S* (has been marked dead|died)|The actor died because its node has died|"
         r"NodeDiedError|raylet.* died"),
    Rule("import_error", log=r"^(ModuleNotFoundError|ImportError): "),
    Rule("config_error", log=r"omegaconf\.errors\.|ConfigCompositionException|hydra\.errors\.|"
         r"Could not override '|Key '.*' is not in struct|MissingMandatoryValue|Error merging override"),
    Rule("user_code", log=r"Traceback \(most recent call last\)"),
)


def classify(evidence: Evidence) -> str | None:
    """None for a run that did not fail; otherwise a class of FAILURE_CLASSES."""
    if evidence.status == "STOPPED":
        return "stopped"
    if evidence.status != "FAILED":
        return None
    return next((rule.failure for rule in RULES if rule.matches(evidence)), "unknown")


def tail(text: str, lines: int = 200) -> str:
    return "\n".join(text.splitlines()[-lines:])


def evidence_of(job, logs: str, status: str | None = None) -> Evidence:
    """Evidence from a RayJob (state.observed) and its driver log; `status` when the run's own
    exit.json says more than Ray."""
    return Evidence(status=status or job.status, error_type=job.error_type or "", exit_code=job.driver_exit_code,
                    message=job.message, log_tail=tail(logs))
