"""The latest checkpoint of a verl run, read by file names from a directory every Ray job can write.

verl's layout (checked on verl 0.3 to 0.8.0.dev: verl/trainer/ppo/ray_trainer.py, verl/utils/checkpoint/):
    <trainer.default_local_dir>/latest_checkpointed_iteration.txt   str(step), written once the step is whole
    <trainer.default_local_dir>/global_step_<N>/actor/               critic/ beside it when PPO uses a critic
        {model,optim,extra_state}_world_size_<W>_rank_<R>.pt         FSDP: each rank loads the file of its own W
        huggingface/  fsdp_config.json  lora_adapter/                not read on resume
        dist_ckpt/metadata.json                                      Megatron: resharded on load, no W in names
    <trainer.default_local_dir>/global_step_<N>/data.pt              dataloader; verl resumes without it
SFT's trainer (sft_trainer_ray) puts the shards straight into global_step_<N>/, with data_<dp rank>.pt.

Nothing here follows a symlink (every open is O_NOFOLLOW, relative to a directory descriptor), reads a
shard's bytes, reads more than a few bytes of the tracker or lists more than MAX_ENTRIES names: whatever
the directory holds becomes a `problem` for people, never an exception.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from specs.checkpoint_state import TRACKER, CheckpointState, step_folder

TRACKER_LIMIT = 64
"""verl writes str(step): anything longer is not its tracker."""
MAX_ENTRIES = 100_000
"""Names listed per folder at most: one rank writes three shards, so this covers 33k GPUs."""
DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
ROLES = ("actor", "critic")
"""Sub-folders of a step that verl's PPO trainer saves into and loads from."""
KINDS = ("model", "optim", "extra_state")
SHARD = re.compile(r"(model|optim|extra_state)_world_size_([1-9][0-9]{0,5})_rank_(0|[1-9][0-9]{0,5})\.pt")
"""verl formats W and R with str(int): a leading zero or a sign names a file verl never opens."""
STEP = re.compile(rb"[ \t\r\n]*([0-9]{1,18})[ \t\r\n]*")
MEGATRON = "dist_ckpt"
MEGATRON_DONE = "metadata.json"
"""megatron-core's dist_checkpointing writes it on rank 0 after every shard is saved."""


class _Unusable(Exception):
    """Why the checkpoint cannot be used, for people."""


def inspect_checkpoint(directory: Path) -> CheckpointState | None:
    """The latest checkpoint in a verl run's trainer.default_local_dir; None when there is none, as for
    verl (no directory or no tracker: it trains from step 0)."""
    try:
        root = os.open(directory, DIRECTORY)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        return _unusable(None, _open_problem(str(directory), err))
    try:
        return _inspect(root)
    finally:
        os.close(root)


def _inspect(root: int) -> CheckpointState | None:
    try:
        text = _read_tracker(root)
    except _Unusable as err:
        return _unusable(None, str(err))
    if text is None:
        return None
    match = STEP.fullmatch(text)
    if match is None:
        return _unusable(None, f"{TRACKER} does not hold a step number ({text[:32]!r})")
    step = int(match.group(1))
    try:
        world_size = _judge_step(root, step_folder(step))
    except _Unusable as err:
        return _unusable(step, str(err))
    return CheckpointState(step=step, world_size=world_size, complete=True)


def _unusable(step: int | None, problem: str) -> CheckpointState:
    return CheckpointState(step=step, world_size=None, complete=False, problem=problem)


def _read_tracker(root: int) -> bytes | None:
    """The tracker's bytes; None when it does not exist. O_NONBLOCK: a planted FIFO cannot hang us."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        fd = os.open(TRACKER, flags, dir_fd=root)
    except FileNotFoundError:
        return None
    except OSError as err:
        raise _Unusable(_open_problem(TRACKER, err, root)) from err
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _Unusable(f"{TRACKER} is not a regular file")
        data = os.read(fd, TRACKER_LIMIT + 1)
    except OSError as err:
        raise _Unusable(f"{TRACKER} cannot be read ({_why(err)})") from err
    finally:
        os.close(fd)
    if len(data) > TRACKER_LIMIT:
        raise _Unusable(f"{TRACKER} is larger than {TRACKER_LIMIT} bytes")
    return data


def _judge_step(root: int, name: str) -> int | None:
    """The world size every shard folder of the step was saved with (None: Megatron only)."""
    with contextlib.ExitStack() as stack:
        step = stack.enter_context(_Folder.open(root, name, f"{name}/"))
        if not step.has_shards() and "actor" not in step.entries:
            raise _Unusable(f"{name}/ holds neither an actor/ folder nor model shards")
        groups = [step] if step.has_shards() else []  # SFT's trainer saves into the step folder itself
        groups += [stack.enter_context(step.child(role)) for role in ROLES if role in step.entries]
        sizes = {group.label: _judge_group(group) for group in groups}
    bound = {label: size for label, size in sizes.items() if size is not None}
    if len(set(bound.values())) > 1:
        saved = ", ".join(f"{label} by {size} GPUs" for label, size in bound.items())
        raise _Unusable(f"its shard folders were saved by different world sizes ({saved})")
    return next(iter(bound.values()), None)


def _judge_group(group: _Folder) -> int | None:
    """W of a folder whose every rank has its shards; None for a finished Megatron checkpoint."""
    shards = group.shards()
    if not shards["model"]:
        return _judge_megatron(group)
    if len(shards["model"]) > 1:
        raise _Unusable(f"{group.label} holds model shards of several world sizes ({sorted(shards['model'])})")
    world_size, ranks = next(iter(shards["model"].items()))
    # verl loads the kinds it saved (load_contents follows save_contents, default all three): a kind
    # some rank saved must be there for every rank.
    for kind in KINDS:
        present = ranks if kind == "model" else shards[kind].get(world_size)
        if present is not None and len(present) < world_size:
            missing = next(rank for rank in range(world_size) if rank not in present)
            more = world_size - len(present) - 1
            raise _Unusable(f"rank {missing}'s {kind} shard is missing in {group.label} "
                           f"({kind}_world_size_{world_size}_rank_{missing}.pt"
                           + (f", and {more} more)" if more else ")"))
    return world_size


def _judge_megatron(group: _Folder) -> None:
    if MEGATRON not in group.entries:
        raise _Unusable(f"{group.label} holds no model shards")
    with group.child(MEGATRON) as dist:
        if dist.entries.get(MEGATRON_DONE) != "file":
            raise _Unusable(f"{dist.label} has no {MEGATRON_DONE}: Megatron did not finish saving it")
    return None


@dataclass
class _Folder:
    """An open directory and the kinds of its entries ("file", "dir", "link", "other"), by name."""

    fd: int
    label: str
    entries: dict[str, str] = field(default_factory=dict)

    @classmethod
    def open(cls, parent: int, name: str, label: str) -> _Folder:
        try:
            fd = os.open(name, DIRECTORY, dir_fd=parent)
        except OSError as err:
            raise _Unusable(_open_problem(label, err, parent, name)) from err
        folder = cls(fd, label)
        try:
            folder.entries = _list(fd, label)
        except BaseException:
            folder.close()
            raise
        return folder

    def child(self, name: str) -> _Folder:
        return _Folder.open(self.fd, name, f"{self.label}{name}/")

    def has_shards(self) -> bool:
        return any(SHARD.fullmatch(name) for name in self.entries)

    def shards(self) -> dict[str, dict[int, set[int]]]:
        """Ranks by world size by kind; a shard name that is not a regular file is a problem."""
        found: dict[str, dict[int, set[int]]] = {kind: {} for kind in KINDS}
        for name, kind in self.entries.items():
            match = SHARD.fullmatch(name)
            if match is None:
                continue
            if kind != "file":
                what = "a symlink, which argus does not follow" if kind == "link" else "not a regular file"
                raise _Unusable(f"{self.label}{name} is {what}")
            world_size, rank = int(match.group(2)), int(match.group(3))
            if rank < world_size:
                found[match.group(1)].setdefault(world_size, set()).add(rank)
        return found

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> _Folder:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _list(fd: int, label: str) -> dict[str, str]:
    """Names and kinds from the directory itself (d_type), never through a symlink; capped."""
    entries: dict[str, str] = {}
    try:
        with os.scandir(fd) as scan:
            for entry in scan:
                if len(entries) >= MAX_ENTRIES:
                    raise _Unusable(f"{label} has more than {MAX_ENTRIES} entries")
                entries[entry.name] = _kind(entry)
    except OSError as err:
        raise _Unusable(f"{label} cannot be listed ({_why(err)})") from err
    return entries


def _kind(entry: os.DirEntry[str]) -> str:
    if entry.is_symlink():
        return "link"
    if entry.is_dir(follow_symlinks=False):
        return "dir"
    return "file" if entry.is_file(follow_symlinks=False) else "other"


def _open_problem(label: str, err: OSError | ValueError, parent: int | None = None, name: str = "") -> str:
    """Linux answers ENOTDIR, not ELOOP, for a symlink opened with O_DIRECTORY | O_NOFOLLOW: lstat tells."""
    number = getattr(err, "errno", None)
    if number == errno.ENOENT:
        return f"{label} does not exist"
    if number in (errno.ELOOP, errno.ENOTDIR):
        kind = "not a directory" if number == errno.ENOTDIR else "not readable"
        with contextlib.suppress(OSError, ValueError):
            if stat.S_ISLNK(os.lstat(name or label, dir_fd=parent).st_mode):
                kind = "a symlink, which argus does not follow"
        return f"{label} is {kind}"
    return f"{label} cannot be opened ({_why(err)})"


def _why(err: BaseException) -> str:
    return getattr(err, "strerror", None) or str(err)
