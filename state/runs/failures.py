"""Why a run failed: one table of rules over Ray's error type, exit code, message and log tail,
and next to it one table of what to do about each class.

The first matching rule wins, so the specific classes come before the catch-alls. Retry policies
(`retry.on`) name these classes. Pure: callers read the logs and redact secrets.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from state.observed import DEADLINE, PREEMPTED  # noqa: F401  (classes argus itself gives a stop)

FAILURE_CLASSES = ("oom", "nccl_timeout", "node_lost", "config_error", "import_error", "runtime_env_setup",
                   "start_timeout", "user_code", "stopped", "unknown", "lost", "deadline")
HEALTH_KINDS = ("idle", "stalled")
"""What a living run can be found to be (specs.kinds.health, reconcile.plan.health): no failure class, but advice."""
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
    """Matched line by line: a rule's log pattern never spans lines, so the lines it matched are its evidence."""
    exit_codes: tuple[int, ...] = ()
    shows: str | None = None
    """Display only: the log lines that explain the class better than the ones `log` matched."""

    def matches(self, e: Evidence) -> bool:
        return (self._ray_said(e)
                or bool(self.log and re.search(self.log, e.log_tail, re.IGNORECASE | re.MULTILINE))
                or self._exited(e))

    def lines_in(self, e: Evidence) -> list[str]:
        """What of the evidence made this rule match: Ray's message, log lines, else the exit code."""
        said = _lines(e.message) if self._ray_said(e) else []
        logged = _matching(self.shows, e.log_tail, 0) or _matching(self.log, e.log_tail, re.IGNORECASE)
        if said or logged:
            return said + logged
        return [f"driver exit code {e.exit_code}"] if self._exited(e) else []

    def _ray_said(self, e: Evidence) -> bool:
        return e.error_type in self.error_types or bool(self.message and re.search(self.message, e.message,
                                                                                    re.IGNORECASE))

    def _exited(self, e: Evidence) -> bool:
        return e.exit_code is not None and e.exit_code in self.exit_codes


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
    Rule("user_code", log=r"Traceback \(most recent call last\)",
         shows=r"\b[A-Za-z_][\w.]*(Error|Exception|Interrupt)(\([\w.]*\))?: "),
)

ADVICE: dict[str, str] = {
    "oom": "Out of memory. On a GPU (CUDA out of memory), in the job's `overrides:`: lower the micro batches "
           "(actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu, "
           "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu, "
           "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu, critic.ppo_micro_batch_size_per_gpu), "
           "offload to the CPU (actor_rollout_ref.actor.fsdp_config.param_offload=True, "
           "actor_rollout_ref.actor.fsdp_config.optimizer_offload=True, "
           "actor_rollout_ref.ref.fsdp_config.param_offload=True), or leave training more of the GPU by "
           "lowering actor_rollout_ref.rollout.gpu_memory_utilization. On the host (exit code 137, Ray's "
           "'Memory on the node' or the kernel's OOM killer): fewer processes per node, or more memory.",
    "nccl_timeout": "A collective (NCCL) operation timed out: a rank hung, or the network between nodes stalled. "
                    "Set NCCL_DEBUG=INFO in the job's `env:` to see the interface and transport each rank "
                    "picks, and pin the right ones with NCCL_SOCKET_IFNAME (and NCCL_IB_HCA, or NCCL_IB_DISABLE=1 "
                    "without InfiniBand). A step that is only slow needs a longer actor_rollout_ref.nccl_timeout "
                    "(seconds). Often transient: with `retry: {max_attempts: N, on: [nccl_timeout]}` argus "
                    "starts a new attempt in the same checkpoint directory, and verl resumes from its last "
                    "checkpoint (saved every trainer.save_freq steps).",
    "node_lost": "A node of the run died or left the cluster (hardware, preemption, a crashed raylet, the "
                 "host's OOM killer). `ray status` shows the nodes alive; the lost node's raylet.out and dmesg "
                 "say why. With `retry: {on: [node_lost]}` a new attempt resumes from the last checkpoint "
                 "(trainer.save_freq) once the cluster has the capacity again.",
    "runtime_env_setup": "Ray could not set up the run's runtime environment before starting it. argus sends "
                         "only env_vars (never a working_dir or pip), so look at Ray's message and the node's "
                         "runtime_env_agent.log and dashboard_agent.log in its Ray session logs (a full disk "
                         "under the session's tmp, a dying agent). Often transient: `retry: {on: "
                         "[runtime_env_setup]}`.",
    "start_timeout": "Ray could not place the run's driver in time (RAY_JOB_START_TIMEOUT_SECONDS): no alive "
                     "node offers what it asks. Compare the job's entrypoint_num_cpus, entrypoint_num_gpus, "
                     "entrypoint_memory and entrypoint_resources (or the cluster's job_defaults) with `ray "
                     "status`: the cluster is full, or a custom resource name is misspelt or declared by no node.",
    "import_error": "A module could not be imported. A run imports from its code snapshot first, then the "
                    "cluster's user_code_path (PYTHONPATH): check that the snapshot's commit holds the module "
                    "(the job's `code:`; `argus validate --deep` checks a verl job's entry module against it), "
                    "that a helper module sits under user_code_path, or install the package into the nodes' "
                    "Python. Retrying gives the same error.",
    "config_error": "Hydra or OmegaConf refused the configuration: an override names a key this verl version "
                    "does not have (misspelt, or renamed), a new key lacks its leading `+`, or a mandatory value "
                    "(???) is unset. Fix the job's `overrides:` or typed fields; `argus validate --deep` composes "
                    "the config against the code snapshot without starting a run. Retrying gives the same error.",
    "user_code": "The run raised an exception (its last lines below): a bug in the code, or data it did not "
                 "expect. `argus logs JOB` shows the whole traceback; fix the code, then make a new snapshot or "
                 "bump `run:` and apply. Retrying gives the same error.",
    "stopped": "The run was stopped: by argus (`state: stopped`, a replace, --prune), by `ray job stop`, or by a "
               "signal to its driver. Nothing to fix; `argus plan` shows whether argus starts it again.",
    "unknown": "No failure rule matched: the log's last lines are below. Read the whole log (`argus logs JOB`) "
               "and Ray's job page; a cause that recurs deserves its own rule in state/runs/failures.py. "
               "`retry: {on: [unknown]}` retries what is not classified.",
    "lost": "The cluster's head restarted while the run was underway, and neither Ray nor the run's exit.json "
            "recorded an end: the run died with the head. Find why the head went down (its logs, `ray status`); "
            "a new attempt (`retry: {on: [lost]}`, or `argus apply --replace job.JOB`) resumes from the last "
            "checkpoint (trainer.save_freq).",
    "deadline": "argus stopped the run at its job's `max_runtime` (counted from when Ray accepted it). A hung run "
                "stopped here is the limit doing its work; a run that needs longer needs a larger `max_runtime`. A "
                "verl PPO/GRPO run with trainer.save_freq > 0 saved a checkpoint shortly before, and a new attempt "
                "(`retry: {on: [deadline]}`, or `argus apply --replace job.JOB`) resumes from it.",
    "idle": "The run holds its GPUs but barely uses them (below the job's `health.idle.below_percent` for all of "
            "its `for:` window): a data loader starved of CPU or I/O, a rank waiting on another, a run that finished "
            "its work but not its process, or a debugging session left open. The incident record's stacks (when "
            "stack dumps work: `argus doctor`) show where each process waits. Stop it and give the GPUs back, fix "
            "the input pipeline (more dataloader workers, data on a faster disk), or set `action: stop` so argus "
            "frees them itself next time.",
    "stalled": "The run's step has not advanced for several times its own recent step time (`health.stall`), or "
               "its log has not grown for the stall alert: a hung collective (NCCL) or a deadlock looks like this. "
               "The incident record's stacks show where each process waits: all ranks in one collective but one "
               "means that rank is the culprit. Set NCCL_DEBUG=INFO in the job's `env:`, check the nodes "
               "(`ray status`), and stop it (`argus apply --replace job.JOB`): a new attempt resumes from the "
               "last checkpoint.",
}
"""What to do about each class of FAILURE_CLASSES, and about an `idle` or `stalled` run (health events, no failure
class) (a test holds every class to having advice): shown by
`argus status`, kept in the run's record, sent in notifications."""
MAX_EVIDENCE_CHARS = 300
_TERMINAL_ESCAPE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")


def classify(evidence: Evidence) -> str | None:
    """None for a run that did not fail; otherwise a class of FAILURE_CLASSES."""
    if evidence.status == "STOPPED":
        return "stopped"
    if evidence.status != "FAILED":
        return None
    return next((rule.failure for rule in RULES if rule.matches(evidence)), "unknown")


def advice_for(failure: str | None) -> str | None:
    return ADVICE.get(failure) if failure else None


def matched_lines(evidence: Evidence, failure: str | None, limit: int = 5) -> tuple[str, ...]:
    """The lines that made the class: what its rules matched in Ray's message and the log tail (for
    user code, the exception raised), the last `limit` distinct ones, each one visible line of at
    most MAX_EVIDENCE_CHARS. Nothing matched an unknown failure: its log's last lines stand in."""
    if failure == "unknown":
        found = _lines(evidence.message) + _lines(evidence.log_tail)[-limit:]
    else:
        found = [line for rule in RULES if rule.failure == failure for line in rule.lines_in(evidence)]
    shown = [line for line in dict.fromkeys(_visible(line) for line in found) if line]
    return tuple(shown[-limit:]) if limit > 0 else ()


def tail(text: str, lines: int = 200) -> str:
    return "\n".join(text.splitlines()[-lines:])


def evidence_of(job, logs: str, status: str | None = None) -> Evidence:
    """Evidence from a RayJob (state.observed) and its driver log; `status` when the run's own
    exit.json says more than Ray."""
    return Evidence(status=status or job.status, error_type=job.error_type or "", exit_code=job.driver_exit_code,
                    message=job.message, log_tail=tail(logs))


def _matching(pattern: str | None, text: str, flags: int) -> list[str]:
    if not pattern:
        return []
    return [line for line in text.splitlines() if re.search(pattern, line, flags)]


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def _visible(line: str) -> str:
    """Logs are written by the run: no terminal escape or control character reaches a terminal or a
    notification, and no line grows without bound."""
    text = _TERMINAL_ESCAPE.sub("", line).replace("\t", " ")
    text = "".join(c if c.isprintable() else "?" for c in text).strip()
    return text if len(text) <= MAX_EVIDENCE_CHARS else text[:MAX_EVIDENCE_CHARS - 1] + "…"
