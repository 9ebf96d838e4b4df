"""The checkpoint a verl run would resume from, read by file names from a directory every Ray job can write.

verl's layouts, checked on the 0.8.0 and 0.9.1 wheels, are in specs/workloads/checkpoint_state.py and
docs/checkpoints.md. A Megatron dist_ckpt tree is finalized once megatron-core wrote metadata.json (Megatron-FSDP:
torch's .metadata, and no common.pt); megatron-core reshards it on load, so no file name binds a world size.

Nothing here follows a symlink (every open is O_NOFOLLOW, relative to a directory descriptor), reads a
shard's bytes, reads more than a few KiB of any file or lists more than MAX_ENTRIES names: whatever the
directory holds becomes a `problem` for people, never an exception.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from specs.workloads import checkpoint_state as ckpt
from specs.workloads.checkpoint_state import TRACKER, CheckpointState, Layout, step_folder
from state.beneath import Refused, read_regular_at

TRACKER_LIMIT = 64
"""verl writes str(step): anything longer is not its tracker."""
MANIFEST_LIMIT = 64 * 1024
"""verl's ckpt_contents.json is about 2 KiB."""
MAX_ENTRIES = 100_000
"""Names listed per folder at most: one rank writes three shards, so this covers 33k GPUs."""
MAX_EARLIER = 5
"""Earlier steps judged, newest first, when looking for the one to fall back to."""
MAX_WORLD = 2**20
DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
STEP = re.compile(rb"[ \t\r\n]*([0-9]{1,18})[ \t\r\n]*")


class _Unusable(Exception):
    """Why the checkpoint cannot be used, for people."""


def inspect_checkpoint(directory: Path) -> CheckpointState | None:
    """The step a verl run resumes from in `auto` mode: the tracker's, in trainer.default_local_dir.
    None when there is none, as for verl (no directory or no tracker: it trains from step 0)."""
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


def inspect_step(path: Path) -> CheckpointState:
    """The step folder trainer.resume_from_path names: verl loads it whatever the tracker says."""
    match = ckpt.STEP_DIR.fullmatch(path.name)
    if not path.is_absolute() or match is None:
        why = "is not an absolute path" if match else "does not name a global_step_<N> folder"
        return _unusable(None, f"{path} {why}", path=str(path))
    try:
        parent = os.open(path.parent, DIRECTORY)
    except (OSError, ValueError) as err:
        return _unusable(None, _open_problem(str(path.parent), err), path=str(path))
    try:
        return _judged(parent, int(match.group(1))).model_copy(update={"path": str(path)})
    finally:
        os.close(parent)


def _inspect(root: int) -> CheckpointState | None:
    try:
        text = _read_small(root, TRACKER, TRACKER, TRACKER_LIMIT)
    except _Unusable as err:
        return _fallback(root, _unusable(None, str(err)))
    if text is None:
        return None
    match = STEP.fullmatch(text)
    if match is None:
        return _fallback(root, _unusable(None, f"{TRACKER} does not hold a step number ({text[:32]!r})"))
    step = int(match.group(1))
    if _absent(root, step_folder(step)):
        return _fallback(root, _unusable(step, f"{step_folder(step)}/ does not exist").model_copy(
            update={"absent": True}))
    return _judged(root, step)


def _absent(root: int, name: str) -> bool:
    """Nothing at all by that name: verl's os.path.exists says no, and it trains from step 0."""
    try:
        os.lstat(name, dir_fd=root)
    except FileNotFoundError:
        return True
    except (OSError, ValueError):
        return False
    return False


def _judged(root: int, step: int, fallback: bool = True) -> CheckpointState:
    try:
        layout, world_size, roles = _judge_step(root, step_folder(step))
    except _Unusable as err:
        state = _unusable(step, str(err))
        return _fallback(root, state) if fallback else state
    return CheckpointState(step=step, world_size=world_size, complete=True, layout=layout, roles=roles)


def _unusable(step: int | None, problem: str, path: str | None = None) -> CheckpointState:
    return CheckpointState(step=step, world_size=None, complete=False, problem=problem, path=path)


def _fallback(root: int, state: CheckpointState) -> CheckpointState:
    """An unusable step, with the newest earlier one that is complete: the advice names a folder that exists."""
    try:
        names = _list(root, "the checkpoint directory")
    except _Unusable as err:  # no earlier step can be named
        return state.model_copy(update={"problem": f"{state.problem}; {err}"})
    found = (ckpt.STEP_DIR.fullmatch(name) for name, kind in names.items() if kind == "dir")
    steps = sorted((int(m.group(1)) for m in found if m), reverse=True)
    earlier = [s for s in steps if state.step is None or s < state.step]
    checked = earlier[:MAX_EARLIER]
    previous = next((s for s in checked if _judged(root, s, fallback=False).complete), None)
    return state.model_copy(update={"previous": previous, "earlier": len(earlier), "checked": len(checked)})


def _read_small(parent: int, name: str, label: str, limit: int) -> bytes | None:
    """A small file's bytes; None when it does not exist (state.beneath: a planted FIFO cannot hang us)."""
    try:
        return read_regular_at(parent, name, limit, label)
    except Refused as err:
        raise _Unusable(str(err)) from err
    except OSError as err:
        raise _Unusable(_open_problem(label, err, parent, name)) from err


def _judge_step(root: int, name: str) -> tuple[Layout, int | None, tuple[str, ...]]:
    """How the step was saved, once every role folder verl loads from it is whole."""
    with contextlib.ExitStack() as stack:
        step = stack.enter_context(_opened(root, name, f"{name}/"))
        if "actor" not in step.entries and not step.holds_engine_files():
            raise _Unusable(f"{name}/ holds neither an actor/ folder nor model shards")
        # SFT's trainer saves into the step folder itself
        roles = tuple(role for role in ckpt.ROLES if role in step.entries) if "actor" in step.entries else ()
        groups = [stack.enter_context(step.child(role)) for role in roles] or [step]
        judged = {group.label: _judge_group(group) for group in groups}
    bound = {label: size for label, (layout, size) in judged.items() if layout == "fsdp"}
    if len(set(bound.values())) > 1:
        saved = ", ".join(f"{label} by {size} GPUs" for label, size in bound.items())
        raise _Unusable(f"its shard folders were saved by different world sizes ({saved})")
    layout, size = next(iter(judged.values()))
    return layout, size, roles


def _judge_group(group: _Folder) -> tuple[Layout, int | None]:
    """The layout of a folder verl's engine saved into, and the GPUs that saved it (None: unknown)."""
    if group.has_shards():
        return "fsdp", _judge_fsdp(group)
    if any(tree in group.entries for tree in ckpt.TREES):
        return "megatron", _judge_split(group)
    if ckpt.MEGATRON in group.entries:
        _judge_tree(group, ckpt.MEGATRON)
        return "megatron_legacy", None
    raise _Unusable(f"{group.label} holds no model shards")


def _judge_fsdp(group: _Folder) -> int:
    """W of a folder whose every rank has its shards."""
    shards = group.shards()
    if not shards["model"]:
        raise _Unusable(f"{group.label} holds no model shards")
    if len(shards["model"]) > 1:
        raise _Unusable(f"{group.label} holds model shards of several world sizes ({sorted(shards['model'])})")
    world_size, ranks = next(iter(shards["model"].items()))
    # verl loads the kinds it saved (load_contents follows save_contents, default all three): a kind
    # some rank saved must be there for every rank.
    for kind in ckpt.KINDS:
        present = ranks if kind == "model" else shards[kind].get(world_size)
        if present is not None and len(present) < world_size:
            missing = next(rank for rank in range(world_size) if rank not in present)
            more = world_size - len(present) - 1
            raise _Unusable(f"rank {missing}'s {kind} shard is missing in {group.label} "
                           f"({kind}_world_size_{world_size}_rank_{missing}.pt"
                           + (f", and {more} more)" if more else ")"))
    return world_size


def _judge_split(group: _Folder) -> int | None:
    """verl 0.9 writes ckpt_contents.json through a .tmp after every tree: a leftover .tmp, or no manifest,
    is a save that did not finish, unless verl's migration script made the layout (it keeps dist_ckpt/)."""
    if ckpt.MANIFEST_TMP in group.entries:
        raise _Unusable(f"{group.label}{ckpt.MANIFEST_TMP} is left over: Megatron did not finish saving it")
    for tree in ckpt.TREES:
        if tree in group.entries:
            with group.child(tree) as part:
                _judge_tree(part, ckpt.MEGATRON)
    if ckpt.MANIFEST in group.entries:
        return _manifest_world_size(group)
    if ckpt.MEGATRON in group.entries:
        return None  # migrated in place (scripts/migrate_megatron_checkpoint_layout.py): no manifest there
    raise _Unusable(f"{group.label} has no {ckpt.MANIFEST}, which verl writes once every tree is saved: Megatron "
                    f"did not finish saving it")


def _judge_tree(parent: _Folder, name: str) -> None:
    """An absent or empty dist_ckpt/ was not saved; a non-empty one must be finalized."""
    if name not in parent.entries:
        return
    with parent.child(name) as tree:
        done = tree.entries.get("metadata.json") == "file" or (
            tree.entries.get(".metadata") == "file" and "common.pt" not in tree.entries)
        if tree.entries and not done:
            raise _Unusable(f"{tree.label} has no metadata.json: Megatron did not finish saving it")


def _manifest_world_size(group: _Folder) -> int | None:
    label = f"{group.label}{ckpt.MANIFEST}"
    data = _read_small(group.fd, ckpt.MANIFEST, label, MANIFEST_LIMIT) or b""
    try:
        manifest = json.loads(data)
    except (ValueError, RecursionError) as err:
        raise _Unusable(f"{label} is not JSON") from err
    if not isinstance(manifest, dict):
        raise _Unusable(f"{label} is not a JSON object")
    size = manifest.get("world_size")
    if size is not None and (type(size) is not int or not 1 <= size <= MAX_WORLD):
        raise _Unusable(f"{label} has a world_size that is not a GPU count ({str(size)[:32]!r})")
    return size


@contextlib.contextmanager
def _opened(parent: int, name: str, label: str) -> Iterator[_Folder]:
    """The folder `name` of `parent`, listed, and closed when done."""
    try:
        fd = os.open(name, DIRECTORY, dir_fd=parent)
    except OSError as err:
        raise _Unusable(_open_problem(label, err, parent, name)) from err
    try:
        yield _Folder(fd, label, _list(fd, label))
    finally:
        os.close(fd)


@dataclass(frozen=True)
class _Folder:
    """An open directory and the kinds of its entries ("file", "dir", "link", "other"), by name."""

    fd: int
    label: str
    entries: dict[str, str]

    def child(self, name: str) -> contextlib.AbstractContextManager[_Folder]:
        return _opened(self.fd, name, f"{self.label}{name}/")

    def has_shards(self) -> bool:
        return any(ckpt.SHARD.fullmatch(name) for name in self.entries)

    def holds_engine_files(self) -> bool:
        """FSDP shards or Megatron trees: what an engine saves into the folder it is given."""
        return self.has_shards() or any(name in self.entries for name in (*ckpt.TREES, ckpt.MEGATRON))

    def shards(self) -> dict[str, dict[int, set[int]]]:
        """Ranks by world size by kind; a shard name that is not a regular file is a problem."""
        found: dict[str, dict[int, set[int]]] = {kind: {} for kind in ckpt.KINDS}
        for name, kind in self.entries.items():
            match = ckpt.SHARD.fullmatch(name)
            if match is None:
                continue
            if kind != "file":
                what = "a symlink, which argus does not follow" if kind == "link" else "not a regular file"
                raise _Unusable(f"{self.label}{name} is {what}")
            world_size, rank = int(match.group(2)), int(match.group(3))
            if rank < world_size:
                found[match.group(1)].setdefault(world_size, set()).add(rank)
        return found


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
