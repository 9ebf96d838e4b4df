"""<shared_root>/.argus/outputs/<key>.json: which workspace's job writes a checkpoint directory.

Each team's outputs are its own (specs.workloads.verl.outputs_dir), but `trainer.checkpoint_dir` names any folder, and
two workspaces naming one would resume from each other's checkpoints. argus cannot read other workspaces'
specs, so each submit leaves a mark on the root: the directory, by the sha256 of its path, names the workspace
and job that write it (written once, never over another's). A plan whose job names a directory another
workspace marked is an error (reconcile.plan.outputs). Any job can write the root: a mark is hostile input,
and with ARGUS_ROOT_KEY set only a signed one counts.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time

from pydantic import ValidationError

from specs.desired import DesiredState
from specs.kinds.models import Job
from specs.workloads import verl
from specs.workloads.submission import expand
from state import root_key
from state.beneath import NotBeneath, made_dir, read_regular
from state.files import replace_in
from state.observed import OutputMark

DIR = ".argus/outputs"
MAX_BYTES = 8192
KIND = "output-mark"


def mark_of(shared_root: str, path: str) -> OutputMark | None:
    """The mark of the directory `path` (absolute), if argus can trust one; None when there is none."""
    try:
        raw = read_regular(shared_root, f"{DIR}/{_key(path)}.json", MAX_BYTES)
    except (NotBeneath, OSError):
        return None  # a link or a FIFO planted there is no mark
    if raw is None:
        return None
    try:
        data = json.loads(raw)
        mark = OutputMark.model_validate({k: v for k, v in data.items() if k != "signature"})
    except (ValueError, ValidationError, AttributeError, RecursionError):
        return None
    if mark.path != path:
        return None
    if root_key.keyed() and not root_key.verify(KIND, mark.path, mark.model_dump(mode="json"), data.get("signature")):
        return None
    return mark


def mark(shared_root: str, path: str, workspace: str, job: str) -> None:
    """Before a run that writes `path` is submitted: the workspace's mark, unless one is there already. Best
    effort: a folder a job swapped for a link (or a full disk) costs the mark, never the submit; a missing mark
    is what a root laid out before marks has anyway, and the plan checks the marks that are there."""
    with contextlib.suppress(OSError):
        _mark(shared_root, path, workspace, job)


def _mark(shared_root: str, path: str, workspace: str, job: str) -> None:
    made = OutputMark(path=path, workspace=workspace, job=job, since=time.time())
    body = made.model_dump(mode="json")
    if (signature := root_key.sign(KIND, made.path, body)) is not None:
        body["signature"] = signature
    with made_dir(shared_root, DIR) as folder:
        name = f"{_key(path)}.json"
        try:
            os.stat(name, dir_fd=folder, follow_symlinks=False)
            return  # first come: never written over (the plan named any other owner before this apply)
        except FileNotFoundError:
            replace_in(folder, name, json.dumps(body, sort_keys=True) + "\n")


def checkpoint_path(desired: DesiredState, job: Job, legacy: bool = False) -> str:
    """The job's checkpoint directory as an absolute, normalised path: what a mark names."""
    root = desired.shared_roots[job.cluster]
    return os.path.normpath(expand(verl.checkpoint_dir(job, desired.workspace.name, legacy), root))


def _key(path: str) -> str:
    return hashlib.sha256(os.path.normpath(path).encode()).hexdigest()[:40]
