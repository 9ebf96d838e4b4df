"""verl workloads: composed against verl's real config (from its published wheels), checked at plan time."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from specs.load.loader import load_workspace
from specs.workloads.submission import expand, resolve
from state.runs.failures import ADVICE
from tests.support.verl_inputs import write_inputs
from tests.support.workspace import make_workspace

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "h20"


@pytest.fixture
def h20(tmp_path: Path, verl_repo: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ARGUS_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "h20"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".verl"))
    shutil.copytree(verl_repo, root / ".verl" / "verl")
    return root


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def test_every_example_job_composes_against_real_verl(h20: Path, argus):
    result = argus("validate", "--deep", h20)
    assert result.code == 0, result.out + result.err
    assert "Deep: 4 verl job(s) compose against their code." in result.out


def test_a_command_job_on_a_verl_jobs_snapshot_is_not_checked_as_verl(h20: Path, argus):
    """It runs its own entrypoint from the snapshot: no verl entry module or config of its own to check."""
    with (h20 / "jobs.yaml").open("a") as jobs:
        jobs.write("---\nkind: Job\nname: prepare-gsm8k\ncluster: h20\ncode: verl-v091\nworkload: command\n"
                   "entrypoint: [python3, examples/data_preprocess/gsm8k.py]\n")
    result = argus("validate", "--deep", h20)
    assert result.code == 0, result.out + result.err
    assert "Valid: workspace 'llm-rl', 1 cluster(s), 2 code snapshot(s), 5 job(s)." in result.out
    assert "Deep: 4 verl job(s) compose against their code." in result.out

    edit(h20 / "jobs.yaml", "  - data.train_batch_size=256", "  - trainer.nnodez=2")
    result = argus("validate", "--deep", "--json", h20)
    assert result.code == 1, result.out + result.err
    [error] = [d for d in json.loads(result.out)["diagnostics"] if d["severity"] == "error"]
    assert (error["file"], error["line"], error["field"]) == ("jobs.yaml", 15, "overrides.1"), error
    assert "no key 'trainer.nnodez'" in error["message"] and "did you mean trainer.nnodes?" in error["message"]


def test_the_failure_advice_names_only_keys_verl_0_9_1_has(verl_repo: Path):
    """The config keys the advice tells people to change exist in the verl the examples pin."""
    config = YAML(typ="safe").load(verl_repo / "verl" / "trainer" / "config" / "_generated_ppo_trainer.yaml")
    keys = set(_dotted(config))
    named = {m for text in ADVICE.values() for m in re.findall(r"\b(?:actor_rollout_ref|critic|trainer)\.\w[\w.]*\w",
                                                               text)}
    assert {"actor_rollout_ref.rollout.gpu_memory_utilization", "actor_rollout_ref.nccl_timeout"} <= named
    assert sorted(named - keys) == []


def test_a_typo_in_an_override_fails_at_its_line(h20: Path, argus):
    edit(h20 / "jobs.yaml", "  - data.train_batch_size=256", "  - trainer.nnodez=2")
    result = argus("validate", "--deep", h20)
    assert result.code == 1
    assert "jobs.yaml:15: no key 'trainer.nnodez' in verl 0.9.1's config ppo_trainer; did you mean trainer.nnodes?" \
           in result.out
    assert "+trainer.nnodez" not in result.out.replace("`+trainer.nnodez=...` adds", "")  # no "append it" advice


def test_an_override_of_a_typed_field_names_the_field(h20: Path, argus):
    edit(h20 / "jobs.yaml", "  - data.train_batch_size=256", "  - +trainer.total_epochs=3")
    result = argus("validate", h20)
    assert result.code == 1
    assert "jobs.yaml:15: overrides.1: '+trainer.total_epochs=3' sets a key argus types: " \
           "use `trainer.total_epochs` instead" in result.err


def test_a_missing_entry_module_is_reported(h20: Path, argus):
    edit(h20 / "jobs.yaml", "name: sft-gsm8k\ncluster: h20\ncode: verl-v091",
         "name: sft-gsm8k\ncluster: h20\ncode: verl-v050")
    result = argus("validate", "--deep", h20)
    assert result.code == 1
    assert "jobs.yaml:43: entry module verl.trainer.sft_trainer_ray is not in code.verl-v050 " \
           "(no verl/trainer/sft_trainer_ray.py)" in result.out


def test_the_entrypoint_reaches_verl_as_exactly_the_argv_intended(h20: Path, tmp_path: Path):
    edit(h20 / "jobs.yaml", "  - data.train_batch_size=256",
         "  - \"+trainer.notes='it\\\\'s a, b $HOME [x]'\"\n  - trainer.val_before_train=false")
    edit(h20 / "jobs.yaml", "total_training_steps: 200,", "total_training_steps: 200, experiment: \"it's a, b $HOME\",")
    desired = load_workspace(h20)
    job = desired.jobs["ppo-gsm8k"]
    sub = resolve(desired.workspace, desired.clusters["h20"], job, None)
    entrypoint = expand(sub.entrypoint, str(tmp_path / "shared"), "the.sid.1")
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "python3").write_text(f"#!{sys.executable}\nimport json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    (fake_bin / "python3").chmod(0o755)
    shell = subprocess.run(["/bin/sh", "-c", entrypoint], capture_output=True, text=True, check=True,
                           env={"PATH": f"{fake_bin}:/usr/bin:/bin", "HOME": "/nowhere"})
    received = json.loads(shell.stdout)
    assert received[:2] == ["-m", "verl.trainer.main_ppo"]
    assert "trainer.experiment_name='it\\'s a, b $HOME'" in received
    assert "+trainer.notes='it\\'s a, b $HOME [x]'" in received
    assert f"data.train_files='{tmp_path}/shared/datasets/gsm8k/train.parquet'" in received
    assert f"hydra.run.dir='{tmp_path}/shared/outputs/llm-rl/logs/the.sid.1'" in received
    assert received == shlex.split(entrypoint)[1:]

    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    config_dir = h20 / ".verl" / "verl"
    subprocess.run(["git", "-C", config_dir, "checkout", "-q", "v0.9.1"], check=True)
    with initialize_config_dir(config_dir=str(config_dir / "verl/trainer/config"), version_base=None):
        cfg = compose(config_name="ppo_trainer", overrides=[a for a in received[2:] if not a.startswith("hydra.")])
    GlobalHydra.instance().clear()
    assert cfg.trainer.experiment_name == "it's a, b $HOME"
    assert cfg.trainer.notes == "it's a, b $HOME [x]"
    assert cfg.trainer.default_local_dir == f"{tmp_path}/shared/outputs/llm-rl/checkpoints/ppo-gsm8k/run-1"


def gpu_workspace(tmp_path: Path, verl_repo: Path, address: str):
    ws = make_workspace(tmp_path / "ws", "verl-checks", address)
    ws.write("cluster.yaml", f"""
        kind: Cluster
        name: local
        address: {address}
        shared_root: .shared
        nodes:
          - {{role: head, count: 1}}
          - {{role: worker, count: 2, resources: {{GPU: 3, worker_node: 1}}}}
        job_defaults:
          entrypoint_num_cpus: 1
          entrypoint_resources: {{worker_node: 1}}
        """)
    ws.write("code.yaml", f"kind: CodeSnapshot\nname: verl\ncluster: local\ngit: {{url: {verl_repo}, ref: v0.9.1}}\n")
    write_inputs(ws.shared, "datasets/gsm8k/train.parquet", "models/qwen")
    return ws


RUNNABLE = ("overrides: [actor_rollout_ref.rollout.name=vllm, actor_rollout_ref.rollout.tensor_model_parallel_size=1,\n"
            "  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2, data.train_batch_size=8,\n"
            "  actor_rollout_ref.actor.ppo_mini_batch_size=4,\n"
            "  actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2, critic.ppo_micro_batch_size_per_gpu=2]\n")
"""What verl 0.9.1's own checks need of a PPO job beside its typed fields (a rollout engine, micro batches)."""


def verl_job(ws, name: str, trainer: str, model: str = "${shared_root}/models/qwen", extra: str = RUNNABLE) -> None:
    ws.write(f"jobs/{name}.yaml", f"""kind: Job
name: {name}
cluster: local
code: verl
workload: ppo
model: {model}
data:
  train: ${{shared_root}}/datasets/gsm8k/train.parquet
  val: ${{shared_root}}/datasets/gsm8k/train.parquet
trainer: {trainer}
{extra}""")


def test_plan_checks_files_capacity_and_checkpoints_on_a_cluster_with_gpus(tmp_path, verl_repo, gpu_cluster, argus):
    ws = gpu_workspace(tmp_path, verl_repo, gpu_cluster.address)
    verl_job(ws, "fits", "{nnodes: 1, n_gpus_per_node: 2}")
    verl_job(ws, "too-big", "{nnodes: 2, n_gpus_per_node: 2}")
    verl_job(ws, "too-few-cpus", "{nnodes: 1, n_gpus_per_node: 2}", extra="")
    verl_job(ws, "no-data", "{nnodes: 1, n_gpus_per_node: 1}", model="Qwen/Qwen2.5-0.5B-Instruct")
    edit(ws.root / "jobs/no-data.yaml", "datasets/gsm8k/train.parquet", "datasets/missing.parquet")
    verl_job(ws, "clash", "{nnodes: 1, n_gpus_per_node: 1, "
                          "checkpoint_dir: '${shared_root}/outputs/verl-checks/checkpoints/fits/run-1'}")
    edit(ws.root / "jobs/too-few-cpus.yaml", "workload: ppo", "workload: sft")  # 10 CPUs per GPU: 20 > 8

    plan = argus("plan", ws.root)
    assert plan.code == 1, plan.out
    assert "Error: jobs/too-big.yaml:10: job.too-big can never fit on cluster 'local': verl asks for " \
           "2 node(s) x (2 GPU, 6 CPU) at once" in plan.out
    assert "Error: jobs/too-few-cpus.yaml:10: job.too-few-cpus can never fit" in plan.out and "20 CPU" in plan.out
    assert "Error: jobs/no-data.yaml:8: " in plan.out and "missing.parquet does not exist" in plan.out
    assert "Warning: jobs/no-data.yaml:6: Qwen/Qwen2.5-0.5B-Instruct is only a hub id" in plan.out
    assert "Error: jobs/fits.yaml:10: job.fits writes checkpoints to " \
           "${shared_root}/outputs/verl-checks/checkpoints/fits/run-1, like job.clash" in plan.out
    assert "Warning: cluster.yaml:7: expected 2 alive worker node(s) with GPU=3, worker_node=1; 1 found" in plan.out
    assert "job.fits can never fit" not in plan.out and "jobs/fits.yaml:9" not in plan.out
    written = sorted(p.relative_to(ws.shared).as_posix() for p in ws.shared.rglob("*")
                     if p.is_file() and not p.relative_to(ws.shared).as_posix().startswith(".argus/runs/"))
    assert written == ["datasets/gsm8k/train.parquet", "models/qwen/config.json",
                       "models/qwen/tokenizer_config.json"]  # only its run index


def test_hydra_settings_and_search_paths_are_never_composed(h20: Path, argus):
    edit(h20 / "jobs.yaml", "overrides: [", "overrides: ['hydra.searchpath=[pkg://this]', ")
    refused = argus("validate", h20)
    assert refused.code == 1 and "hydra.* cannot be overridden" in refused.err, refused.err
    assert "The Zen of Python" not in refused.out + refused.err


def test_a_second_check_does_not_compose_again(h20: Path, argus, monkeypatch: pytest.MonkeyPatch):
    from state.verl import compose as verl_compose

    assert argus("validate", "--deep", h20).code == 0

    def must_not_compose(*_args):
        raise AssertionError("composed again despite the cache")

    monkeypatch.setattr(verl_compose, "_compose", must_not_compose)
    again = argus("validate", "--deep", h20)
    assert again.code == 0, again.out + again.err


@pytest.mark.parametrize("path", ["pkg://this", "file:///etc", "file://../outside", "file://verl/../..",
                                  "file://missing"])
def test_a_search_path_leading_outside_the_snapshot_is_not_composed(tmp_path: Path, path: str, capsys):
    """pkg:// imports an installed package to find configs; file:// outside the snapshot reads anything."""
    from state.verl.entry import EntryProblem, _searchpath

    code = tmp_path / "code"
    primary = code / "recipe" / "config" / "trainer.yaml"
    primary.parent.mkdir(parents=True)
    (code / "verl" / "trainer" / "config").mkdir(parents=True)
    primary.write_text(f"hydra:\n  searchpath: [{path}]\n")
    found = _searchpath(code, primary)
    assert isinstance(found, EntryProblem) and "hydra.searchpath" in found.message and path in found.message
    assert "The Zen of Python" not in capsys.readouterr().out  # `import this` never ran


def test_a_recipes_search_path_is_pinned_to_the_snapshots_folders(tmp_path: Path):
    from state.verl.entry import _searchpath

    code = tmp_path / "code"
    primary = code / "recipe" / "config" / "trainer.yaml"
    primary.parent.mkdir(parents=True)
    (code / "verl" / "trainer" / "config").mkdir(parents=True)
    primary.write_text("hydra:\n  searchpath: [file://verl/trainer/config, pkg://verl.trainer.config]\n")
    folder = (code / "verl" / "trainer" / "config").resolve()
    assert _searchpath(code, primary) == [f"hydra.searchpath=[file://{folder},file://{folder}]"]


def _dotted(tree: dict, prefix: str = "") -> list[str]:
    return [key for name, value in tree.items() for key in
            (_dotted(value, f"{prefix}{name}.") if isinstance(value, dict) else [f"{prefix}{name}"])]


def test_a_config_that_is_a_symlink_is_never_composed_nor_quoted(tmp_path: Path, verl_repo: Path):
    """A snapshot on the shared root can be written by any job: a config linked to another file (a secret)
    must not reach Hydra, whose errors quote the lines they cannot parse."""
    from specs.kinds.models import Job
    from state.verl.entry import EntryProblem, resolve_entry

    code = tmp_path / "code"
    code.mkdir()
    archive = subprocess.run(["git", "-C", verl_repo, "archive", "v0.9.1"], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", code], input=archive, check=True)
    secret = tmp_path / "secret.yaml"
    secret.write_text("token: [ghp_not_yaml_at_all\n")
    job = Job(kind="Job", name="j", cluster="c", code="v", workload="ppo", model="/m", data={"train": "/d"})
    for linked in (code / "verl/trainer/config/algorithm/rollout_correction.yaml", code / "verl/trainer/config"):
        target = linked.with_name(linked.name + ".real")
        linked.rename(target)
        linked.symlink_to(secret if linked.suffix else target)
        found = resolve_entry(code, job)
        assert isinstance(found, EntryProblem) and "is a symlink" in found.message, found
        assert "ghp_" not in found.message
        linked.unlink()
        target.rename(linked)
    assert not isinstance(resolve_entry(code, job), EntryProblem)
