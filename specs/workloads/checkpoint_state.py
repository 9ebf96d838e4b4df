"""What a verl checkpoint directory holds, as plain data: read by state/runs/checkpoints.py, judged by the
pure planner (reconcile/plan/checkpoints.py), which may not import anything that reads files.

verl's layouts (0.8.0 and 0.9.1 wheels; R = trainer.default_local_dir; docs/checkpoints.md):
    R/latest_checkpointed_iteration.txt           str(step): the step `auto` resumes from
    R/global_step_<N>/{actor,critic}/ + data.pt   PPO; SFT saves the engine's files into global_step_<N>/ itself
      FSDP          {model,optim,extra_state}_world_size_<W>_rank_<R>.pt (each rank loads its own W's)
      Megatron 0.8  dist_ckpt/ (one megatron-core tree), huggingface/        verl 0.9 refuses it
      Megatron 0.9  {model,optimizer,extra}/dist_ckpt/, model/huggingface/, ckpt_contents.json last

Also the pure readings both sides share: where a job tells verl to resume from (its overrides), and
which checkpoint directory a recorded submission wrote to (its entrypoint).
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Sequence
from functools import lru_cache
from typing import Literal

from specs.base import Frozen
from specs.workloads.verl_profile import Resume

TRACKER = "latest_checkpointed_iteration.txt"
"""verl's tracker in trainer.default_local_dir: the step of the last checkpoint saved whole."""
Layout = Literal["fsdp", "megatron", "megatron_legacy"]
"""fsdp: {model,optim,extra_state}_world_size_W_rank_R.pt; megatron: verl 0.9's split
{model,optimizer,extra}/dist_ckpt/ + ckpt_contents.json; megatron_legacy: verl 0.8's one dist_ckpt/."""
RESHARDED: tuple[str, ...] = ("megatron", "megatron_legacy")
"""Layouts megatron-core reshards on load: the world size may change between attempts."""
MODES = ("auto", "disable", "resume_path")
"""trainer.resume_mode values verl knows (PPO, SFT: 0.8 and 0.9)."""
LOCAL_DIR = "trainer.default_local_dir"
ROLES = ("actor", "critic")
"""Sub-folders of a step that verl's PPO trainer saves into and loads from."""
KINDS = ("model", "optim", "extra_state")
SHARD = re.compile(r"(model|optim|extra_state)_world_size_([1-9][0-9]{0,5})_rank_(0|[1-9][0-9]{0,5})\.pt")
"""FSDP's shards. verl formats W and R with str(int): a leading zero or a sign names a file verl never opens."""
STEP_DIR = re.compile(r"global_step_(0|[1-9][0-9]{0,17})")
MEGATRON = "dist_ckpt"
TREES = ("model", "optimizer", "extra")
"""verl 0.9's split Megatron layout: any of them present is that layout (verl's own _raise_for_old_layout)."""
MANIFEST = "ckpt_contents.json"
"""verl 0.9's Megatron manifest, written last (through MANIFEST_TMP and os.replace): the save finished."""
MANIFEST_TMP = MANIFEST + ".tmp"
MIGRATE = "python scripts/migrate_megatron_checkpoint_layout.py --checkpoint"
"""verl 0.9's own way from the 0.8 Megatron layout to the split one (in its source tree, scripts/)."""


def step_folder(step: int) -> str:
    """The folder verl saves a step into, next to the tracker."""
    return f"global_step_{step}"


class CheckpointState(Frozen):
    """One checkpoint verl would resume from, judged by file names (and Megatron's small manifest)."""

    step: int | None
    """The step the tracker (or trainer.resume_from_path) names; None when it cannot be read."""
    world_size: int | None
    """GPUs that saved it: W in FSDP's shard names, or ckpt_contents.json's (Megatron, verl 0.9); None when unknown."""
    complete: bool
    """verl can load this step: every rank's shards are there (FSDP) or every tree was finalized (Megatron)."""
    problem: str | None = None
    """Why it is not complete or cannot be read, for people; None when complete."""
    layout: Layout | None = None
    """How its shards were saved (the actor's); None when nothing was recognised."""
    roles: tuple[str, ...] = ()
    """Role folders verl loads from the step (actor, critic); empty for SFT's trainer, which saves into
    global_step_<N>/ itself."""
    path: str | None = None
    """The step folder inspected when trainer.resume_from_path named it; None: the directory's tracker."""
    previous: int | None = None
    """When this step is not usable: the newest earlier global_step_<K>/ there that is complete."""
    earlier: int = 0
    """When this step is not usable: how many earlier global_step_<K>/ folders the directory holds."""
    checked: int = 0
    """How many of those (newest first) were judged for `previous`: the count is capped."""
    absent: bool = False
    """The tracker names a step folder that is not there: verl's find_latest_ckpt_path then finds nothing
    and the run trains from step 0 (0.8.0 and 0.9.1 checkpoint_manager.py)."""

    @property
    def reshards(self) -> bool:
        """Megatron loads its checkpoints on another world size; FSDP's ranks each open their own W's file."""
        return self.layout in RESHARDED


def resume_of(overrides: Sequence[str]) -> Resume:
    """trainer.resume_mode and trainer.resume_from_path as a job's Hydra overrides set them (the last
    one wins, as in Hydra); verl's defaults (auto, null) otherwise."""
    mode, path = "auto", None
    for override in overrides:
        key, _, value = override.partition("=")
        key = key.lstrip("+~").strip()
        if key == "trainer.resume_mode":
            mode = _hydra_text(value) or "auto"
        elif key == "trainer.resume_from_path":
            path = _hydra_text(value)
    return Resume(mode=mode, path=path)


def reads_path(resume: Resume, workload: str) -> bool:
    """verl loads trainer.resume_from_path rather than the tracker's step: always with resume_path;
    with auto, only SFT's trainer, and only when the path is set (checkpoint_handler.py)."""
    return resume.mode == "resume_path" or (resume.mode == "auto" and workload == "sft" and resume.path is not None)


@lru_cache(maxsize=4096)  # the planner asks for every record once per starting job
def local_dir_of(entrypoint: str) -> str | None:
    """The trainer.default_local_dir a recorded verl entrypoint set (argus's override); None when absent
    or unreadable (a record from elsewhere, or of a `command` job)."""
    try:
        words = shlex.split(entrypoint)
    except ValueError:
        return None
    found = [w.partition("=")[2] for w in words if w.lstrip("+").partition("=")[0] == LOCAL_DIR]
    return _hydra_text(found[-1]) if found else None


def same_path(one: str, other: str) -> bool:
    """Two spellings of one absolute path on the shared root ("a/b/" and "a//b")."""
    return posixpath.normpath(one) == posixpath.normpath(other)


def _hydra_text(value: str) -> str | None:
    """A Hydra override's value as text: quotes removed (argus quotes every string), null as None."""
    value = value.strip()
    quoted = re.fullmatch(r"'(.*)'|\"(.*)\"", value, re.DOTALL)
    if quoted:
        inner = quoted.group(1) if quoted.group(1) is not None else quoted.group(2)
        return re.sub(r"\\(['\"\\])", r"\1", inner)
    return None if value in ("", "null", "None") else value
