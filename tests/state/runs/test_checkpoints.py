"""verl checkpoint directories, laid out on disk with the names verl writes, read as hostile input."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from specs.workloads.checkpoint_state import CheckpointState
from state.runs import checkpoints
from state.runs.checkpoints import MAX_ENTRIES, inspect_checkpoint
from tests.support.checkpoints import KINDS, errors_for, judged, observed, ppo, record, save_step


def test_a_complete_checkpoint_gives_its_step_and_world_size(tmp_path: Path) -> None:
    save_step(tmp_path, 20, 4)
    save_step(tmp_path, 40, 8, roles=("actor", "critic"))
    assert inspect_checkpoint(tmp_path) == CheckpointState(step=40, world_size=8, complete=True, layout="fsdp",
                                                            roles=("actor", "critic"))


def test_no_directory_or_no_tracker_is_no_checkpoint(tmp_path: Path) -> None:
    assert inspect_checkpoint(tmp_path / "absent") is None
    assert inspect_checkpoint(tmp_path) is None
    save_step(tmp_path, 10, 2, tracker=False)  # verl trains from step 0 without a tracker
    assert inspect_checkpoint(tmp_path) is None
    assert errors_for(None, gpus=2) == []


def test_sft_shards_in_the_step_folder_itself(tmp_path: Path) -> None:
    folder = tmp_path / "global_step_7"
    folder.mkdir()
    for rank in range(2):
        for kind in KINDS:
            (folder / f"{kind}_world_size_2_rank_{rank}.pt").write_bytes(b"torch")
        (folder / f"data_{rank}.pt").write_bytes(b"dataloader")
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("7\n")
    assert inspect_checkpoint(tmp_path) == CheckpointState(step=7, world_size=2, complete=True, layout="fsdp")


def test_a_missing_shard_names_the_rank(tmp_path: Path) -> None:
    folder = save_step(tmp_path, 40, 4)
    (folder / "actor" / "optim_world_size_4_rank_3.pt").unlink()
    state = inspect_checkpoint(tmp_path)
    assert state is not None and (state.step, state.complete) == (40, False)
    assert state.problem == "rank 3's optim shard is missing in global_step_40/actor/ (optim_world_size_4_rank_3.pt)"
    [message] = errors_for(state)
    assert message.startswith("job.ppo's latest checkpoint global_step_40 is incomplete (")
    assert "rank 3's optim shard is missing" in message and "there is no earlier checkpoint" in message


def test_a_missing_critic_rank_and_a_counted_rest(tmp_path: Path) -> None:
    folder = save_step(tmp_path, 5, 8, roles=("actor", "critic"))
    for rank in (2, 5, 6):
        (folder / "critic" / f"model_world_size_8_rank_{rank}.pt").unlink()
    state = inspect_checkpoint(tmp_path)
    assert state is not None and not state.complete
    assert state.problem == ("rank 2's model shard is missing in global_step_5/critic/ "
                             "(model_world_size_8_rank_2.pt, and 2 more)")


def test_shards_of_another_world_size_do_not_fill_a_gap(tmp_path: Path) -> None:
    folder = save_step(tmp_path, 3, 2)
    (folder / "actor" / "model_world_size_2_rank_1.pt").unlink()
    (folder / "actor" / "model_world_size_4_rank_1.pt").write_bytes(b"torch")
    state = inspect_checkpoint(tmp_path)
    assert state is not None and not state.complete and "several world sizes ([2, 4])" in (state.problem or "")


def test_actor_and_critic_of_different_world_sizes_are_refused(tmp_path: Path) -> None:
    folder = save_step(tmp_path, 3, 2)
    save_step(tmp_path / "other", 3, 4, roles=("critic",))
    (tmp_path / "other" / "global_step_3" / "critic").rename(folder / "critic")
    state = inspect_checkpoint(tmp_path)
    assert state is not None and not state.complete
    assert state.problem == ("its shard folders were saved by different world sizes "
                             "(global_step_3/actor/ by 2 GPUs, global_step_3/critic/ by 4 GPUs)")


def test_a_step_without_actor_or_shards_is_incomplete(tmp_path: Path) -> None:
    (tmp_path / "global_step_9" / "critic").mkdir(parents=True)
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("9")
    state = inspect_checkpoint(tmp_path)
    assert state == CheckpointState(step=9, world_size=None, complete=False,
                                    problem="global_step_9/ holds neither an actor/ folder nor model shards")
    assert (state.previous, state.earlier) == (None, 0)


def test_a_tracker_pointing_at_a_missing_step(tmp_path: Path) -> None:
    save_step(tmp_path, 20, 4)
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("40")
    state = inspect_checkpoint(tmp_path)
    assert state == CheckpointState(step=40, world_size=None, complete=False, problem="global_step_40/ does not exist",
                                    previous=20, earlier=1, checked=1, absent=True)
    # verl 0.8/0.9's find_latest_ckpt_path returns None for a missing folder: the run trains from step 0
    assert errors_for(state) == []
    job = ppo()
    found = judged(job, observed(state, record(job)))
    assert found.note == ("starts from step 0 (latest_checkpointed_iteration.txt names global_step_40, which is not "
                          "there)")
    [warning] = found.warnings
    assert warning == ("job.ppo's latest_checkpointed_iteration.txt names global_step_40, which is not in "
                       "/shared/outputs/team/checkpoints/ppo/run-1: verl finds no checkpoint and trains from step 0; "
                       "to resume from global_step_20 instead, point latest_checkpointed_iteration.txt at it (`echo 20 "
                       "> /shared/outputs/team/checkpoints/ppo/run-1/latest_checkpointed_iteration.txt`)")
    assert "delete" not in warning
    (tmp_path / "global_step_20").rename(tmp_path / "old")
    alone = judged(job, observed(inspect_checkpoint(tmp_path), record(job)))
    assert alone.errors == () and alone.warnings[0].endswith("trains from step 0")


@pytest.mark.parametrize("content", [b"", b"forty", b"-4", b"+4", b"4_0", b"4.0", b"\xff\xfe", b"\x00",
                                     "\u0664\u0660".encode(), b"1" * 30, b"4 0"])
def test_a_garbage_tracker_is_a_problem_never_a_crash(tmp_path: Path, content: bytes) -> None:
    save_step(tmp_path, 4, 1)
    (tmp_path / "latest_checkpointed_iteration.txt").write_bytes(content)
    state = inspect_checkpoint(tmp_path)
    assert state is not None and state.step is None and not state.complete
    assert "does not hold a step number" in (state.problem or "")
    [message] = errors_for(state, gpus=1)
    assert message.startswith("job.ppo's checkpoint directory has an unusable ")
    assert "the newest complete step there is global_step_4" in message


def test_a_tracker_over_the_cap_is_not_read(tmp_path: Path) -> None:
    save_step(tmp_path, 4, 1)
    (tmp_path / "latest_checkpointed_iteration.txt").write_text(" " * 70 + "4")
    state = inspect_checkpoint(tmp_path)
    assert state is not None and state.problem == "latest_checkpointed_iteration.txt is larger than 64 bytes"


def test_a_tracker_that_is_a_fifo_or_a_directory_does_not_hang(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "latest_checkpointed_iteration.txt")
    state = inspect_checkpoint(tmp_path)
    assert state is not None and state.problem == "latest_checkpointed_iteration.txt is not a regular file (a FIFO)"
    (tmp_path / "latest_checkpointed_iteration.txt").unlink()
    (tmp_path / "latest_checkpointed_iteration.txt").mkdir()
    state = inspect_checkpoint(tmp_path)
    assert state is not None and state.step is None and not state.complete


def test_a_symlinked_tracker_is_refused_without_reading_its_target(tmp_path: Path) -> None:
    run = tmp_path / "run"
    save_step(run, 40, 8)
    (run / "latest_checkpointed_iteration.txt").unlink()
    outside = tmp_path / "outside.txt"
    outside.write_text("40")  # would name the complete step, were it followed
    (run / "latest_checkpointed_iteration.txt").symlink_to(outside)
    state = inspect_checkpoint(run)
    assert state is not None and (state.step, state.complete) == (None, False)
    assert state.problem == "latest_checkpointed_iteration.txt is a symlink, which argus does not follow"
    assert errors_for(state, gpus=8) != []


def test_a_symlinked_step_folder_is_refused(tmp_path: Path) -> None:
    run, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    save_step(elsewhere, 40, 8)  # complete, were it followed
    run.mkdir()
    (run / "latest_checkpointed_iteration.txt").write_text("40")
    (run / "global_step_40").symlink_to(elsewhere / "global_step_40")
    state = inspect_checkpoint(run)
    assert state == CheckpointState(step=40, world_size=None, complete=False,
                                    problem="global_step_40/ is a symlink, which argus does not follow")
    assert (state.earlier, state.previous) == (0, None)  # a symlinked step folder is no step to go back to


def test_symlinked_role_folders_shards_and_directory_are_refused(tmp_path: Path) -> None:
    folder = save_step(tmp_path / "run", 2, 2)
    save_step(tmp_path / "other", 2, 2)
    (folder / "actor" / "model_world_size_2_rank_1.pt").unlink()
    (folder / "actor" / "model_world_size_2_rank_1.pt").symlink_to(
        tmp_path / "other" / "global_step_2" / "actor" / "model_world_size_2_rank_1.pt")
    state = inspect_checkpoint(tmp_path / "run")
    assert state is not None and state.problem == ("global_step_2/actor/model_world_size_2_rank_1.pt is a symlink, "
                                                   "which argus does not follow")
    os.rename(folder / "actor", tmp_path / "moved")
    (folder / "actor").symlink_to(tmp_path / "other" / "global_step_2" / "actor")
    state = inspect_checkpoint(tmp_path / "run")
    assert state is not None and state.problem == "global_step_2/actor/ is a symlink, which argus does not follow"
    (tmp_path / "link").symlink_to(tmp_path / "other")
    state = inspect_checkpoint(tmp_path / "link")
    assert state is not None and (state.step, state.complete) == (None, False) and "symlink" in (state.problem or "")


def test_a_folder_with_too_many_entries_is_not_listed_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkpoints, "MAX_ENTRIES", 5)
    save_step(tmp_path, 1, 2)
    state = inspect_checkpoint(tmp_path)
    assert state is not None and state.problem == "global_step_1/actor/ has more than 5 entries"
    assert MAX_ENTRIES == 100_000


def test_an_unreadable_step_folder_is_a_problem(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads any directory")
    folder = save_step(tmp_path, 1, 1)
    (folder / "actor").chmod(0)
    try:
        state = inspect_checkpoint(tmp_path)
    finally:
        (folder / "actor").chmod(0o755)
    assert state is not None and not state.complete and "global_step_1/actor/" in (state.problem or "")


def test_megatron_checkpoints_are_complete_once_metadata_is_written(tmp_path: Path) -> None:
    dist = tmp_path / "global_step_6" / "actor" / "dist_ckpt"
    dist.mkdir(parents=True)
    (dist / "__0_0.distcp").write_bytes(b"torch")
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("6")
    state = inspect_checkpoint(tmp_path)
    assert state is not None and state.problem == ("global_step_6/actor/dist_ckpt/ has no metadata.json: "
                                                   "Megatron did not finish saving it")
    (dist / "metadata.json").write_text('{"sharded_backend": "torch_dist"}')
    assert inspect_checkpoint(tmp_path) == CheckpointState(step=6, world_size=None, complete=True,
                                                           layout="megatron_legacy", roles=("actor",))
    assert errors_for(inspect_checkpoint(tmp_path)) == []


def test_resume_needs_the_world_size_the_checkpoint_was_saved_with(tmp_path: Path) -> None:
    save_step(tmp_path, 40, 8)
    state = inspect_checkpoint(tmp_path)
    assert errors_for(state, gpus=8) == []
    [error] = errors_for(state, gpus=4)
    assert error.startswith("job.ppo's latest checkpoint global_step_40 was saved by 8 GPUs (model_world_size_8), but "
                            "the job now has 4 (trainer.nnodes x n_gpus_per_node): verl cannot load shards")


def test_a_step_that_is_a_file_is_a_problem(tmp_path: Path) -> None:
    (tmp_path / "global_step_3").write_bytes(b"not a folder")
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("3")
    state = inspect_checkpoint(tmp_path)
    assert state == CheckpointState(step=3, world_size=None, complete=False,
                                    problem="global_step_3/ is not a directory")
