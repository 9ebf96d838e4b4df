"""A `workload: command` job whose entrypoint launches verl: a warning that names the trainer and the GPUs it
will take, which the queue does not count. Pure: reads the spec only.

A pasted `python3 -m verl.trainer.main_ppo ...` runs as written, but argus sees a command: no config composed,
no checks, and a demand of its driver's resources (one CPU). verl then places 8 GPUs per node the admission
queue never counted, and another team's job is admitted onto them.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from specs.address import Address
from specs.desired import DesiredState
from specs.diagnostics import Diagnostic
from specs.kinds.models import Job

LAUNCH = re.compile(r"(?:^|\s)-m\s*((?:verl\.(?:trainer|experimental)|recipe)\.[A-Za-z0-9_.]+)")
"""`python3 -m verl.trainer.main_ppo`, `torchrun ... -m verl.trainer.sft_trainer`, `-m recipe.dapo.main_dapo`."""
SCRIPT = re.compile(r"(?:^|\s|/)(verl/trainer/(?:main_ppo|sft_trainer_ray|sft_trainer|fsdp_sft_trainer)\.py)")
"""`python3 verl/trainer/main_ppo.py ...`: the same trainer, run as a file."""
NOT_TRAINERS = ("verl.trainer.main_generation", "verl.trainer.main_eval")
"""verl's offline tools: generation holds GPUs too, but is no trainer; said apart below."""
MAX_TEXT = 64 * 1024
"""An entrypoint is read this far: a spec is anyone's, and the regexes stay linear in it."""
SFT_RAY = "verl.trainer.sft_trainer_ray"
TORCHRUN_SFT = ("verl.trainer.sft_trainer", "verl.trainer.fsdp_sft_trainer")


@dataclass(frozen=True)
class VerlLaunch:
    """What the entrypoint runs, and the GPUs it asks for when the command line says (None: it does not)."""

    module: str
    gpus: int | None
    how: str
    """How the GPUs were counted, in verl's keys: `trainer.nnodes=2 x trainer.n_gpus_per_node=8`."""


def verl_launch(entrypoint: list[str] | str | None) -> VerlLaunch | None:
    """The verl trainer or recipe the command launches, if it launches one."""
    text = _text(entrypoint)
    found = LAUNCH.search(text)
    script = None if found else SCRIPT.search(text)
    if found is None and script is None:
        return None
    module = found.group(1) if found else script.group(1).removesuffix(".py").replace("/", ".")  # type: ignore[union-attr]
    if "torchrun" in text and module in TORCHRUN_SFT:
        nodes, per_node = _int(text, r"--nnodes[= ](\S+)", 1), _int(text, r"--nproc[_-]per[_-]node[= ](\S+)", 1)
        return VerlLaunch(module, _times(nodes, per_node), f"--nnodes={_shown(nodes)} x --nproc_per_node="
                                                         f"{_shown(per_node)}")
    per_node_default = 1 if module == SFT_RAY else 8  # verl's own config defaults (ppo_trainer, sft_trainer_engine)
    nodes = _int(text, r"(?:^|\s)trainer\.nnodes=(\S+)", 1)
    per_node = _int(text, r"(?:^|\s)trainer\.n_gpus_per_node=(\S+)", per_node_default)
    return VerlLaunch(module, _times(nodes, per_node),
                      f"trainer.nnodes={_shown(nodes)} x trainer.n_gpus_per_node={_shown(per_node)}")


def command_verl_warning(job: Job) -> tuple[str, str] | None:
    """(message, hint) for a command job that launches verl on GPUs its demand does not hold; else None."""
    if job.workload != "command" or (launch := verl_launch(job.entrypoint)) is None:
        return None
    counted = (job.demand or {}).get("GPU", job.entrypoint_num_gpus or 0)
    if counted and (launch.gpus is None or counted >= launch.gpus):
        return None  # the job declares the GPUs itself: argus counts what it was told
    asked = f"{launch.gpus} GPUs ({launch.how})" if launch.gpus is not None else f"the GPUs of {launch.how}"
    kind = "verl's offline tool" if launch.module in NOT_TRAINERS else "verl's trainer" \
        if launch.module.startswith("verl.") else "the verl recipe"
    message = (f"the entrypoint runs {kind} {launch.module}, which asks Ray for {asked}; the queue counts only "
               f"this command's own demand ({counted:g} GPU): other jobs are admitted onto those GPUs, and no verl "
               "check runs")
    hint = ("write it as a verl job (`argus import verl-script`: its config is then checked and its pools counted), "
            "or declare `demand:` with the GPUs and CPUs it holds")
    return message, hint


def command_verl_diagnostics(desired: DesiredState) -> list[Diagnostic]:
    """The plan's warnings for command jobs that launch verl, at their `entrypoint:` line."""
    found = []
    for name, job in sorted(desired.jobs.items()):
        if (said := command_verl_warning(job)) is not None:
            address = Address.job(name)
            found.append(Diagnostic(severity="warning", address=address, field="entrypoint", message=said[0],
                                    hint=said[1]).located(desired.source(address)))
    return found


def _text(entrypoint: list[str] | str | None) -> str:
    if entrypoint is None:
        return ""
    text = shlex.join(entrypoint) if isinstance(entrypoint, list) else entrypoint
    return text[:MAX_TEXT].replace("\\\n", " ")


def _int(text: str, pattern: str, default: int) -> int | str:
    """The value a flag or override sets: an int, the text as written (a shell variable), or verl's default."""
    found = re.search(pattern, text)
    if found is None:
        return default
    value = found.group(1).strip("'\"")
    return int(value) if value.isdigit() and len(value) <= 6 else value


def _times(nodes: int | str, per_node: int | str) -> int | None:
    return nodes * per_node if isinstance(nodes, int) and isinstance(per_node, int) else None


def _shown(value: int | str) -> str:
    return str(value) if isinstance(value, int) else repr(value)
