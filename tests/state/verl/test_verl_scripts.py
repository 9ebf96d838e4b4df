"""verl's own example scripts, as argus expresses them (tests/state/verl/verl_scripts/), checked against the verl
wheels argus supports: each composes with no false error, and its demand has the shape verl's placement
code would request for that version (docs/verl.md cites where: main_ppo's ResourcePoolManager, one
placement group per node of {CPU: 3, GPU: 1} bundles; sft_trainer_ray's pool of 10 CPUs per GPU;
0.9's separate rollout replicas of 2; 0.8's TaskRunner holding one CPU)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from reconcile.plan.demand import demand_of
from specs.load.loader import load_workspace
from specs.workloads.submission import driver_needs, resolve
from state.code.sources import resolve_source
from state.observed import SnapshotState
from state.verl.checks import JobCheck, check_job
from tests.support.verl_scripts import SCRIPTS, VERSIONS

PPO = 3
"""CPUs per GPU of main_ppo's pools (max_colocate_count=3)."""

GRAD_OFFLOAD = "no key 'actor_rollout_ref.actor.megatron.grad_offload' in verl 0.9.1's config"
"""verl 0.9 dropped the key the Megatron scripts still set: said with the keys that are there."""
LEGACY_REWARD = "verl.trainer.main_ppo of verl 0.9.1 ignores reward_model.enable_resource_pool"
"""0.9 composes the top-level reward_model.* but never reads it: the reward pool would silently not exist."""

# script -> version -> [(pool, nnodes, GPUs per node, CPUs per GPU)], or the error its verl version refuses it with
SHAPES: dict[str, dict[str, list[tuple[str, int, int, float]] | str]] = {
    "ppo-critic-fsdp-release": {v: [("global_pool", 1, 8, PPO)] for v in VERSIONS},
    "grpo-fsdp-vllm": {v: [("global_pool", 1, 8, PPO)] for v in VERSIONS},
    "lora-grpo-fsdp": {v: [("global_pool", 1, 2, PPO)] for v in VERSIONS},
    "multinode-grpo-fsdp": {v: [("global_pool", 4, 8, PPO)] for v in VERSIONS},
    "sglang-ppo-critic": {v: [("global_pool", 1, 8, PPO)] for v in VERSIONS},
    "train-files-list-grpo": {v: [("global_pool", 1, 8, PPO)] for v in VERSIONS},
    "megatron-grpo-multinode": {"0.8.0": [("global_pool", 4, 8, PPO)], "0.9.1": GRAD_OFFLOAD},
    "recipe-dapo-megatron-config-name": {"0.8.0": [("global_pool", 1, 16, PPO)], "0.9.1": GRAD_OFFLOAD},
    "sft-trainer-ray": {v: [("trainer", 1, 1, 10)] for v in VERSIONS},
    "sft-trainer-torchrun": {v: [] for v in VERSIONS},
    "distillation-teacher-pool": {v: [("global_pool", 1, 8, PPO), ("teacher_pool", 1, 4, PPO)] for v in VERSIONS},
    "reward-model-pool-legacy-recipe-fapo": {"0.8.0": [("global_pool", 2, 8, PPO), ("reward_pool", 2, 8, PPO)],
                                             "0.9.1": LEGACY_REWARD},
    "reward-model-pool-fapo": {"0.9.1": [("global_pool", 2, 8, PPO), ("reward_pool", 2, 8, PPO)]},
    "separate-rollout-v1-separate-async": {"0.9.1": [("global_pool", 1, 4, PPO), ("rollout_pool", 2, 2, 2)]},
    # separation/utils.py create_resource_pool_manager: trainer_pool; llm_server.py: rollout replicas of tp GPUs
    "fully-async-dapo-fsdp2-8-8": {v: [("trainer_pool", 1, 8, PPO), ("rollout_pool", 8, 1, 2)] for v in VERSIONS},
    "one-step-off-policy-fsdp2": {v: [("trainer_pool", 1, 6, PPO), ("rollout_pool", 1, 2, 2)] for v in VERSIONS},
}
OUTSIDE_CPUS = {"fully-async-dapo-fsdp2-8-8": 23.0, "one-step-off-policy-fsdp2": 10.0}
"""CPUs of actors outside placement groups: fully-async's TaskRunner 1 + rollouter 10 + trainer 10 + message
queue 2; one-step-off's TaskRunner 10 (their @ray.remote(num_cpus=...), 0.8.0 and 0.9.1 alike)."""
CASES = [(name, version) for name, by_version in SHAPES.items() for version in by_version]


def checked(ws, name: str, version: str) -> tuple[JobCheck, object]:
    text = (SCRIPTS / f"{name}.yaml").read_text().replace("code: verl\n", f"code: verl-{version.replace('.', '')}\n")
    ws.write(f"jobs/{name}.yaml", text)
    desired = load_workspace(ws.root)
    job = desired.jobs[name]
    source = resolve_source(desired.snapshots[job.code], desired.root, os.environ["ARGUS_CACHE_DIR"], 60)
    result = check_job(desired, job, SnapshotState(source=source), os.environ["ARGUS_CACHE_DIR"], files=False)
    return result, (desired, job)


@pytest.mark.parametrize(("name", "version"), CASES)
def test_a_real_script_plans_with_the_shape_verl_would_request(scripts_ws, name: str, version: str):
    result, (desired, job) = checked(scripts_ws, name, version)
    errors = [d.text for d in result.diagnostics if d.severity == "error"]
    expected = SHAPES[name][version]
    if isinstance(expected, str):  # verl of this version refuses the script, or ignores part of it
        assert any(expected in e for e in errors), errors
        return
    assert errors == [], errors
    assert result.profile is not None and result.profile.version == version
    assert result.profile.knowledge == version.rsplit(".", 1)[0] + ".x"
    pools = [(p.name, p.nnodes, p.gpus_per_node, p.cpus_per_gpu) for p in result.profile.pools]
    assert pools == expected
    sub = resolve(desired.workspace, desired.cluster_of(job), job)
    demand = demand_of(job, sub, result.profile)
    bundles = [{"GPU": float(g), "CPU": float(g * c)} for _, n, g, c in expected for _ in range(n)]
    assert [dict(b) for b in demand.bundles] == bundles
    runner = 1.0 if version == "0.8.0" and job.workload != "sft" else 0.0  # 0.8's TaskRunner: num_cpus=1
    runner = OUTSIDE_CPUS.get(name, runner)
    assert demand.spread.get("CPU", 0.0) == runner


def test_torchruns_gpus_are_held_by_the_driver_on_its_node(scripts_ws):
    result, (desired, job) = checked(scripts_ws, "sft-trainer-torchrun", "0.9.1")
    sub = resolve(desired.workspace, desired.cluster_of(job), job)
    assert sub.entrypoint.split(" && ", 1)[-1].startswith(
        "torchrun --standalone --nnodes=1 --nproc_per_node=8 -m verl.trainer.sft_trainer ")
    assert driver_needs(sub) == {"worker_node": 1, "CPU": 0.5, "GPU": 8}
    assert demand_of(job, sub, result.profile).bundles == ()


@pytest.mark.parametrize("version", VERSIONS)
def test_a_recipe_composes_its_own_config_through_the_snapshots_search_path(scripts_ws, version: str):
    text = (SCRIPTS / "grpo-fsdp-vllm.yaml").read_text().replace(
        "workload: grpo\n", "workload: grpo\nentry: {module: recipe.dapo.main_dapo}\n")
    text = text.replace('  - "data.truncation=error"\n', '  - "data.truncation=error"\n'
                                                          '  - "algorithm.filter_groups.enable=True"\n'
                                                          '  - "algorithm.filter_groups.metric=acc"\n')
    (SCRIPTS / "grpo-fsdp-vllm.yaml").read_text()  # the script itself is unchanged
    scripts_ws.write("jobs/dapo.yaml", text.replace("name: grpo-fsdp-vllm", "name: dapo").replace(
        "code: verl\n", f"code: verl-{version.replace('.', '')}\n"))
    desired = load_workspace(scripts_ws.root)
    job = desired.jobs["dapo"]
    source = resolve_source(desired.snapshots[job.code], desired.root, os.environ["ARGUS_CACHE_DIR"], 60)
    result = check_job(desired, job, SnapshotState(source=source), os.environ["ARGUS_CACHE_DIR"], files=False)
    assert [d.text for d in result.diagnostics if d.severity == "error"] == []
    assert result.profile is not None and result.profile.config_name == "dapo_trainer"
    assert result.profile.module == "recipe.dapo.main_dapo"
    assert [p.name for p in result.profile.pools] == ["global_pool"]


def test_a_recipe_whose_config_cannot_be_read_from_its_module_must_name_it(tmp_path: Path):
    from specs.kinds.models import Entry, Job
    from state.verl.entry import EntryProblem, resolve_entry

    code = tmp_path / "code"
    (code / "recipe" / "odd").mkdir(parents=True)
    module = "import hydra\nCP = 'config'\n\n@hydra.main(config_path=CP, config_name='odd')\ndef main(c): ...\n"
    (code / "recipe" / "odd" / "main.py").write_text(module)
    job = Job(kind="Job", name="j", cluster="c", code="v", workload="ppo", model="/m", data={"train": "/d"},
              entry=Entry(module="recipe.odd.main"))
    found = resolve_entry(code, job)
    assert isinstance(found, EntryProblem) and "entry: {config_dir, config_name}" in found.message


def test_an_sft_driver_on_ray_sees_a_sliver_of_a_gpu_and_asks_for_no_cpu_resource(scripts_ws):
    """sft_trainer_ray computes on trainer.device in its driver (cuda, forced by verl 0.9): with entrypoint
    resources set, Ray shows the driver no GPU unless it asks for one; `cpu` would be a resource in 0.8."""
    result, (desired, job) = checked(scripts_ws, "sft-trainer-ray", "0.8.0")
    sub = resolve(desired.workspace, desired.cluster_of(job), job)
    assert driver_needs(sub)["GPU"] == 0.01
    assert "trainer.device" not in sub.entrypoint
    assert [p.gpu_resource for p in result.profile.pools] == ["GPU"]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_recipe_main_that_reads_reward_model_enable_is_not_told_verl_ignores_it(scripts_ws, version: str):
    result, _ = checked(scripts_ws, "recipe-prime", version)
    found = [d.text for d in result.diagnostics]
    assert not [t for t in found if "ignores reward_model" in t], found
    assert result.profile is not None and result.profile.config_name == "prime_trainer"



def test_verls_own_main_ppo_on_that_config_is_told_at_the_entry_that_its_config_sets_the_ignored_key(scripts_ws):
    """main_ppo (0.9.1 main_ppo.py:47 reads config.reward.reward_model.enable) composing the recipe's config:
    the key is set by the recipe's YAML, not by an override, so the finding is at `entry:` and says so."""
    text = (SCRIPTS / "recipe-prime.yaml").read_text().replace(
        "entry: {module: recipe.prime.main_prime}",
        "entry: {config_dir: recipe/prime/config, config_name: prime_trainer}")
    scripts_ws.write("jobs/prime-on-main-ppo.yaml", text.replace("name: recipe-prime", "name: prime-on-main-ppo")
                     .replace("code: verl\n", "code: verl-091\n"))
    desired = load_workspace(scripts_ws.root)
    job = desired.jobs["prime-on-main-ppo"]
    source = resolve_source(desired.snapshots[job.code], desired.root, os.environ["ARGUS_CACHE_DIR"], 60)
    result = check_job(desired, job, SnapshotState(source=source), os.environ["ARGUS_CACHE_DIR"], files=False)
    [legacy] = [d for d in result.diagnostics if "ignores reward_model.enable," in d.text]
    assert legacy.severity == "error" and legacy.field == "entry"
    assert str(legacy.where) == "jobs/prime-on-main-ppo.yaml:9"  # the `entry:` line, not `overrides:`
    assert ("verl.trainer.main_ppo of verl 0.9.1 ignores reward_model.enable, which the config prime_trainer sets "
            "(no override does) (0.8 moved it to reward.reward_model.enable)") in legacy.text


@pytest.mark.parametrize(("version", "rules_ran", "words"), [
    ("0.10.0.dev", True, "outside argus's verl knowledge: composed and checked with its 0.9.x rules, as warnings"),
    ("0.7.0", False, "outside argus's verl knowledge: composed only")])
def test_the_plan_says_which_rules_checked_a_verl_outside_the_supported_range(scripts_ws, scripts_repo, tmp_path,
                                                                             version, rules_ran, words):
    """A snapshot of a later verl (its version file says so) gets the newest rules as warnings; an older one is
    composed only: the plan's words say what was done."""
    repo = tmp_path / "verl"
    subprocess.run(["git", "clone", "-q", "-b", "v0.9.1-recipe", str(scripts_repo), str(repo)], check=True,
                   capture_output=True)
    (repo / "verl" / "version" / "version").write_text(version)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@localhost"]
    subprocess.run([*git, "commit", "-qam", f"as verl {version}"], check=True)
    scripts_ws.write("code-other.yaml", f"kind: CodeSnapshot\nname: verl-other\ncluster: local\n"
                                        f"git: {{url: {repo}, ref: HEAD}}\n")
    text = (SCRIPTS / "grpo-fsdp-vllm.yaml").read_text().replace("code: verl\n", "code: verl-other\n")
    scripts_ws.write("jobs/other.yaml", text.replace("rollout.name=vllm", "rollout.name=hf").replace(
        "name: grpo-fsdp-vllm", "name: other"))
    desired = load_workspace(scripts_ws.root)
    job = desired.jobs["other"]
    source = resolve_source(desired.snapshots[job.code], desired.root, os.environ["ARGUS_CACHE_DIR"], 60)
    result = check_job(desired, job, SnapshotState(source=source), os.environ["ARGUS_CACHE_DIR"], files=False)
    assert result.profile is not None and result.profile.knowledge is None
    assert result.profile.checked == words
    rule = [d for d in result.diagnostics if "rollout.name" in d.text and "hf" in d.text]
    assert [d.severity for d in rule] == (["warning"] if rules_ran else [])
    assert all(d.severity == "warning" for d in result.diagnostics)


def test_the_old_fsdp_sft_trainer_gets_its_model_in_the_config_its_hydra_main_names(scripts_ws, scripts_repo):
    """verl <= 0.7's fsdp_sft_trainer (v0.5.0 fsdp_sft_trainer.py:799) composes sft_trainer, whose model is
    model.partial_pretrain: argus sets it there, in the check and in the run's argv, and Hydra composes it."""
    scripts_ws.write("code-050.yaml", f"kind: CodeSnapshot\nname: verl-050\ncluster: local\n"
                                      f"git: {{url: {scripts_repo}, ref: v0.5.0}}\n")
    result, (desired, job) = checked(scripts_ws, "sft-fsdp-sft-trainer-v050", "0.5.0")
    assert [d.text for d in result.diagnostics if d.severity == "error"] == []
    assert result.profile is not None and result.profile.config_name == "sft_trainer"
    from specs.workloads import verl

    argv = verl.argv(job, desired.workspace.name)
    assert argv[:6] == ["torchrun", "--standalone", "--nnodes=1", "--nproc_per_node=2", "-m",
                        "verl.trainer.fsdp_sft_trainer"]
    assert "model.partial_pretrain='google/gemma-2b-it'" in argv and not [a for a in argv if "model.path" in a]


def test_a_module_whose_hydra_main_names_a_config_with_another_model_key_must_name_it(tmp_path: Path):
    from specs.kinds.models import Entry, Job
    from state.verl.entry import EntryProblem, resolve_entry

    code = tmp_path / "code"
    (code / "recipe" / "sft").mkdir(parents=True)
    module = "import hydra\n\n@hydra.main(config_path='config', config_name='sft_trainer')\ndef main(c): ...\n"
    (code / "recipe" / "sft" / "main.py").write_text(module)
    job = Job(kind="Job", name="j", cluster="c", code="v", workload="sft", model="/m", data={"train": "/d"},
              entry=Entry(launcher="torchrun", module="recipe.sft.main"))
    found = resolve_entry(code, job)
    assert isinstance(found, EntryProblem)
    assert found.message == ("the @hydra.main of recipe.sft.main composes config sft_trainer, whose model is "
                             "model.partial_pretrain, not model.path: name it in `entry: {config_name: sft_trainer}` "
                             "so argus sets the model there")


@pytest.mark.parametrize("version", VERSIONS)
def test_a_literal_config_path_is_told_hydra_read_it_against_the_modules_package(scripts_ws, version: str):
    result, _ = checked(scripts_ws, "megatron-config-path-literal", version)
    [entry] = [d for d in result.diagnostics if d.severity == "error"]
    assert entry.field == "entry" and str(entry.where) == "jobs/megatron-config-path-literal.yaml:9"
    assert entry.message == (
        f"config config/ppo_megatron_trainer.yaml is not in code.verl-{version.replace('.', '')}: entry.config_dir is "
        "relative to the snapshot, while a script's --config-path=config is resolved by Hydra against the module's "
        "package (verl.trainer.main_ppo is in verl/trainer/): write `entry: {config_dir: verl/trainer/config}`")
    # what it says to write composes
    text = (SCRIPTS / "megatron-config-path-literal.yaml").read_text().replace(
        "config_dir: config,", "config_dir: verl/trainer/config,")
    scripts_ws.write("jobs/megatron-config-path-literal.yaml", text.replace(
        "code: verl\n", f"code: verl-{version.replace('.', '')}\n"))
    desired = load_workspace(scripts_ws.root)
    job = desired.jobs["megatron-config-path-literal"]
    source = resolve_source(desired.snapshots[job.code], desired.root, os.environ["ARGUS_CACHE_DIR"], 60)
    result = check_job(desired, job, SnapshotState(source=source), os.environ["ARGUS_CACHE_DIR"], files=False)
    assert not [d for d in result.diagnostics if d.field == "entry"]
    assert result.profile is not None and result.profile.config_name == "ppo_megatron_trainer"


def test_docs_state_the_versions_the_tests_compose_and_cite_every_rule_per_version():
    import re

    import state.verl.rules as rules
    import state.verl.rules_limits as limits

    docs = (Path(__file__).resolve().parents[3] / "docs" / "verl.md").read_text()
    [supported] = [line for line in docs.splitlines() if line.startswith("| 0.8.x, 0.9.x")]
    assert sorted(set(re.findall(r"\b\d+\.\d+\.\d+\b", supported))) == sorted(VERSIONS)
    header = "| argus check (`state/verl/…`) | " + " | ".join(f"verl {v}" for v in VERSIONS) + " |"
    table = docs.split(header, 1)[1].split("\n\n", 1)[0]
    source = Path(rules.__file__).read_text()
    bodies = source.split("def ppo_problems", 1)[1].split("\ndef _applied", 1)[0]
    applied = [name for names in re.findall(r"\[([^\]]*)\]", bodies) for name in re.findall(r"\b_[a-z_]+\b", names)]
    applied += [rule.__name__ for rule in limits.RULES]
    cited = [name for name in applied if f"`{name}`" in table or f"`rules.py` `{name}`" in table]
    assert applied and cited == applied, sorted(set(applied) - set(cited))
    for row in table.splitlines()[1:]:  # each cell names a file:line of that version, or says it is not applied
        assert all(re.search(r"\.py:\d+|—|same file", cell) for cell in row.split(" | ")[1:]), row
