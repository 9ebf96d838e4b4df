"""Checkpoints laid out on disk as each supported verl writes them (0.8.0, 0.9.0, 0.9.1 wheels), and the
hostile variants a shared root can hold; read by state/runs/checkpoints.py, judged by the planner."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from specs.desired import DesiredState, Source
from specs.kinds.models import Cluster, Job, Workspace
from specs.workloads.checkpoint_state import CheckpointState
from state.observe import read_checkpoints
from state.observed import legacy_key
from state.runs import checkpoints
from state.runs.checkpoints import inspect_checkpoint, inspect_step
from tests.support.checkpoints import errors_for, profile, save_step

TRACKER = "latest_checkpointed_iteration.txt"
MANIFEST = "ckpt_contents.json"


def dist_tree(folder: Path, finished: bool = True, rank_files: int = 2) -> Path:
    """A megatron-core torch_dist tree: common.pt, shards, torch's .metadata, then metadata.json last."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "common.pt").write_bytes(b"torch")
    for rank in range(rank_files):
        (folder / f"__{rank}_0.distcp").write_bytes(b"torch")
    (folder / ".metadata").write_bytes(b"dcp")
    if finished:
        (folder / "metadata.json").write_text('{"sharded_backend": "torch_dist"}')
    return folder


def megatron_08(role: Path, finished: bool = True) -> None:
    """verl 0.8.0: one dist_ckpt/ (optimizer, lr scheduler, rng; model too without a bridge), HF weights beside."""
    dist_tree(role / "dist_ckpt", finished)
    (role / "huggingface").mkdir(parents=True)
    (role / "huggingface" / "model.safetensors").write_bytes(b"weights")
    (role / "transformer_config.json").write_text("{}")


def megatron_09(role: Path, world_size: int = 16, manifest: bool = True, dist_model: bool = False) -> None:
    """verl 0.9: every tree's folder exists; model/dist_ckpt/ stays empty when the bridge saves HF weights."""
    (role / "model" / "dist_ckpt").mkdir(parents=True)
    if dist_model:
        dist_tree(role / "model" / "dist_ckpt")
    else:
        (role / "model" / "huggingface").mkdir()
        (role / "model" / "huggingface" / "model.safetensors").write_bytes(b"weights")
    dist_tree(role / "optimizer" / "dist_ckpt")
    dist_tree(role / "extra" / "dist_ckpt")
    (role / "transformer_config.json").write_text("{}")
    if manifest:
        contents = {"schema_version": 2, "framework": "megatron", "role": "actor", "global_step": 40,
                    "world_size": world_size, "save_contents": ["model", "optimizer", "extra"]}
        (role / MANIFEST).write_text(json.dumps(contents, indent=2, sort_keys=True))


def ppo_step(root: Path, step: int, save, roles: tuple[str, ...] = ("actor",), **options) -> Path:
    folder = root / f"global_step_{step}"
    for role in roles:
        save(folder / role, **options)
    (folder / "data.pt").write_bytes(b"dataloader")
    (root / TRACKER).write_text(str(step))
    return folder


@pytest.mark.parametrize("version", ["0.8.0", "0.9.0", "0.9.1"])
def test_fsdp_is_the_same_in_every_supported_version(tmp_path: Path, version: str) -> None:
    save_step(tmp_path, 40, 4, roles=("actor", "critic"))
    state = inspect_checkpoint(tmp_path)
    assert state == CheckpointState(step=40, world_size=4, complete=True, layout="fsdp", roles=("actor", "critic"))
    assert errors_for(state, verl=profile(version=version)) == []


def test_megatron_08_layout_is_complete_once_metadata_json_is_written(tmp_path: Path) -> None:
    folder = ppo_step(tmp_path, 40, megatron_08, roles=("actor", "critic"), finished=False)
    state = inspect_checkpoint(tmp_path)
    assert state is not None and state.problem == ("global_step_40/actor/dist_ckpt/ has no metadata.json: Megatron "
                                                   "did not finish saving it")
    for role in ("actor", "critic"):
        (folder / role / "dist_ckpt" / "metadata.json").write_text("{}")
    state = inspect_checkpoint(tmp_path)
    assert state == CheckpointState(step=40, world_size=None, complete=True, layout="megatron_legacy",
                                    roles=("actor", "critic"))
    assert errors_for(state, verl=profile(version="0.8.0")) == []
    [refused] = errors_for(state, verl=profile(version="0.9.1"))
    assert f"--checkpoint {tmp_path}" not in refused  # the path as the run sees it, on the shared root
    assert "migrate_megatron_checkpoint_layout.py --checkpoint " \
           "/shared/outputs/team/checkpoints/ppo/run-1/global_step_40/critic" in refused


def test_megatron_09_split_layout_is_complete_with_its_manifest(tmp_path: Path) -> None:
    ppo_step(tmp_path, 40, megatron_09, world_size=16)
    state = inspect_checkpoint(tmp_path)
    assert state == CheckpointState(step=40, world_size=16, complete=True, layout="megatron", roles=("actor",))
    # what argus called incomplete before, advising to delete it
    assert errors_for(state, gpus=16, verl=profile(version="0.9.1")) == []
    assert errors_for(state, gpus=8, verl=profile(version="0.9.1")) == []  # resharded: a warning at most


def test_megatron_09_with_model_shards_in_dist_ckpt(tmp_path: Path) -> None:
    ppo_step(tmp_path, 40, megatron_09, roles=("actor", "critic"), dist_model=True, world_size=8)
    state = inspect_checkpoint(tmp_path)
    assert state is not None and state.complete and (state.layout, state.world_size) == ("megatron", 8)


def test_megatron_09_save_that_did_not_finish(tmp_path: Path) -> None:
    folder = ppo_step(tmp_path, 40, megatron_09, manifest=False)
    actor = folder / "actor"
    state = inspect_checkpoint(tmp_path)
    assert state is not None and state.problem == ("global_step_40/actor/ has no ckpt_contents.json, which verl "
                                                   "writes once every tree is saved: Megatron did not finish saving it")
    (actor / f"{MANIFEST}.tmp").write_text('{"world_size": 16')  # rank 0 died writing it
    state = inspect_checkpoint(tmp_path)
    assert state is not None and state.problem == ("global_step_40/actor/ckpt_contents.json.tmp is left over: "
                                                   "Megatron did not finish saving it")
    (actor / MANIFEST).write_text('{"world_size": 16}')  # a leftover .tmp still means the last save broke off
    assert not inspect_checkpoint(tmp_path).complete


def test_megatron_09_tree_without_metadata_json(tmp_path: Path) -> None:
    folder = ppo_step(tmp_path, 40, megatron_09)
    (folder / "actor" / "optimizer" / "dist_ckpt" / "metadata.json").unlink()
    state = inspect_checkpoint(tmp_path)
    assert state is not None and state.problem == ("global_step_40/actor/optimizer/dist_ckpt/ has no metadata.json: "
                                                   "Megatron did not finish saving it")


def test_megatron_fsdp_tree_is_finished_by_torch_metadata(tmp_path: Path) -> None:
    folder = ppo_step(tmp_path, 40, megatron_09)
    model = folder / "actor" / "model" / "dist_ckpt"
    (model / "__0_0.distcp").write_bytes(b"dtensor")
    assert not inspect_checkpoint(tmp_path).complete
    (model / ".metadata").write_bytes(b"dcp")  # torch.distributed.checkpoint: no common.pt, no metadata.json
    assert inspect_checkpoint(tmp_path).complete


def test_a_checkpoint_migrated_in_place_loads_on_09(tmp_path: Path) -> None:
    """verl's migration script hardlinks the old dist_ckpt/ into the three trees, keeps it, writes no manifest."""
    folder = ppo_step(tmp_path, 40, megatron_08)
    actor = folder / "actor"
    for tree in ("model", "optimizer", "extra"):
        dist_tree(actor / tree / "dist_ckpt")
    (actor / "huggingface").rename(actor / "model" / "huggingface")
    state = inspect_checkpoint(tmp_path)
    assert state == CheckpointState(step=40, world_size=None, complete=True, layout="megatron", roles=("actor",))
    assert errors_for(state, verl=profile(version="0.9.1")) == []


def test_sft_saves_flat_into_the_step_folder(tmp_path: Path) -> None:
    step = tmp_path / "global_step_7"
    megatron_09(step, world_size=2)
    (step / "data_0.pt").write_bytes(b"dataloader")
    (tmp_path / TRACKER).write_text("7")
    assert inspect_checkpoint(tmp_path) == CheckpointState(step=7, world_size=2, complete=True, layout="megatron")


@pytest.mark.parametrize(("content", "problem"), [
    (b"not json", "is not JSON"),
    (b"[" * 60_000 + b"]" * 60_000, "is larger than 65536 bytes"),
    (b"[" * 30_000 + b"]" * 30_000, "is not JSON"),  # nesting deeper than the parser's recursion
    (b"[16]", "is not a JSON object"),
    (b'{"world_size": "16"}', "has a world_size that is not a GPU count ('16')"),
    (b'{"world_size": true}', "has a world_size that is not a GPU count ('True')"),
    (b'{"world_size": 0}', "has a world_size that is not a GPU count ('0')"),
    (b'{"world_size": 1e400}', "has a world_size that is not a GPU count ('inf')"),
    (b'{"world_size": 99999999999999999999}', "has a world_size that is not a GPU count ('99999999999999999999')"),
    (b"\xff\xfe\x00", "is not JSON"),
])
def test_a_hostile_manifest_is_a_problem_never_a_crash(tmp_path: Path, content: bytes, problem: str) -> None:
    folder = ppo_step(tmp_path, 40, megatron_09)
    (folder / "actor" / MANIFEST).write_bytes(content)
    state = inspect_checkpoint(tmp_path)
    assert state is not None and not state.complete
    assert state.problem == f"global_step_40/actor/{MANIFEST} {problem}"


def test_a_manifest_that_is_a_fifo_or_a_symlink_is_not_opened(tmp_path: Path) -> None:
    folder = ppo_step(tmp_path, 40, megatron_09)
    manifest = folder / "actor" / MANIFEST
    manifest.unlink()
    os.mkfifo(manifest)
    assert inspect_checkpoint(tmp_path).problem == f"global_step_40/actor/{MANIFEST} is not a regular file (a FIFO)"
    manifest.unlink()
    outside = tmp_path / "outside.json"
    outside.write_text('{"world_size": 16}')
    manifest.symlink_to(outside)
    assert inspect_checkpoint(tmp_path).problem == (f"global_step_40/actor/{MANIFEST} is a symlink, which argus does "
                                                    "not follow")


def test_symlinked_megatron_trees_are_refused(tmp_path: Path) -> None:
    folder = ppo_step(tmp_path, 40, megatron_09)
    optimizer = folder / "actor" / "optimizer"
    os.rename(optimizer / "dist_ckpt", tmp_path / "elsewhere")
    (optimizer / "dist_ckpt").symlink_to(tmp_path / "elsewhere")  # verl's migration --mode symlink does this
    assert inspect_checkpoint(tmp_path).problem == ("global_step_40/actor/optimizer/dist_ckpt/ is a symlink, which "
                                                    "argus does not follow")


def test_the_newest_complete_earlier_step_is_found_and_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    save_step(tmp_path, 10, 2)
    save_step(tmp_path, 20, 2)
    broken = save_step(tmp_path, 30, 2)
    (broken / "actor" / "model_world_size_2_rank_1.pt").unlink()
    (tmp_path / "global_step_25").symlink_to(tmp_path / "global_step_20")  # not a step folder verl wrote
    (tmp_path / "global_step_07").mkdir()  # verl writes str(int): never a leading zero
    save_step(tmp_path, 50, 2, tracker=False)  # newer than the tracker's step: not to go back to
    (tmp_path / TRACKER).write_text("30")
    state = inspect_checkpoint(tmp_path)
    assert state is not None and (state.previous, state.earlier, state.checked) == (20, 2, 2)
    monkeypatch.setattr(checkpoints, "MAX_EARLIER", 1)
    (tmp_path / "global_step_20" / "actor" / "optim_world_size_2_rank_0.pt").unlink()
    state = inspect_checkpoint(tmp_path)
    assert state is not None and (state.previous, state.earlier, state.checked) == (None, 2, 1)


def test_a_directory_too_big_to_list_names_no_earlier_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    save_step(tmp_path, 10, 1)
    (tmp_path / TRACKER).write_text("20")
    for name in ("a", "b", "c"):
        (tmp_path / name).mkdir()
    monkeypatch.setattr(checkpoints, "MAX_ENTRIES", 4)
    state = inspect_checkpoint(tmp_path)
    assert state is not None and (state.previous, state.earlier) == (None, 0)
    assert state.problem == ("global_step_20/ does not exist; the checkpoint directory has more than 4 entries")


def test_the_folder_resume_from_path_names(tmp_path: Path) -> None:
    save_step(tmp_path / "run-1", 40, 4)
    step = tmp_path / "run-1" / "global_step_40"
    assert inspect_step(step) == CheckpointState(step=40, world_size=4, complete=True, layout="fsdp",
                                                 roles=("actor",), path=str(step))
    missing = inspect_step(tmp_path / "run-1" / "global_step_60")
    assert (missing.problem, missing.previous, missing.path) == ("global_step_60/ does not exist", 40,
                                                                  f"{tmp_path}/run-1/global_step_60")
    assert inspect_step(Path("run-1/global_step_40")).problem == "run-1/global_step_40 is not an absolute path"
    assert inspect_step(tmp_path / "run-1").problem == f"{tmp_path}/run-1 does not name a global_step_<N> folder"
    (tmp_path / "link").symlink_to(tmp_path / "run-1")
    linked = inspect_step(tmp_path / "link" / "global_step_40")
    assert linked.problem == f"{tmp_path}/link is a symlink, which argus does not follow"


def test_observation_follows_the_jobs_resume_overrides(tmp_path: Path) -> None:
    save_step(tmp_path / "outputs/team/checkpoints/ppo/run-1", 40, 4)
    save_step(tmp_path / "outputs/checkpoints/old/run-1", 20, 2)
    old_step = "${shared_root}/outputs/checkpoints/old/run-1/global_step_20"

    def seen(workload: str = "ppo", **fields) -> CheckpointState | None:
        job = Job(kind="Job", name="ppo", cluster="c", workload=workload, model="/m", data={"train": "/d"}, **fields)
        cluster = Cluster(kind="Cluster", name="c", address="http://x:1", shared_root=str(tmp_path))
        state = DesiredState("/ws", Workspace(kind="Workspace", name="team"), {"c": cluster}, {"ppo": job}, {},
                             {"job.ppo": Source("jobs.yaml", 1, {})}, {"c": str(tmp_path)})
        return read_checkpoints(state, ()).get("ppo")

    assert seen() == CheckpointState(step=40, world_size=4, complete=True, layout="fsdp", roles=("actor",))
    save_step(tmp_path / "outputs/checkpoints/ppo/run-1", 30, 2)  # where an argus before per-workspace outputs put it
    job = Job(kind="Job", name="ppo", cluster="c", workload="ppo", model="/m", data={"train": "/d"})
    both = read_checkpoints(DesiredState("/ws", Workspace(kind="Workspace", name="team"), {"c": Cluster(
        kind="Cluster", name="c", address="http://x:1", shared_root=str(tmp_path))}, {"ppo": job}, {},
        {"job.ppo": Source("jobs.yaml", 1, {})}, {"c": str(tmp_path)}), ())
    assert (both["ppo"].step, both[legacy_key("ppo")].step) == (40, 30)
    assert seen(overrides=["trainer.resume_mode=disable"]) is None
    explicit = seen(overrides=["trainer.resume_mode=resume_path", f"trainer.resume_from_path='{old_step}'"])
    assert explicit is not None and (explicit.step, explicit.world_size) == (20, 2)
    assert explicit.path == f"{tmp_path}/outputs/checkpoints/old/run-1/global_step_20"
    # PPO in auto mode ignores resume_from_path; SFT's trainer loads it
    assert seen(overrides=[f"trainer.resume_from_path={old_step}"]).step == 40
    assert seen("sft", overrides=[f"trainer.resume_from_path={old_step}"]).step == 20
