"""Every class of GPU-burning verl mistake is a plan error at the line that made it, found before any submit
(issue 24): one job holds one mistake per override line, so one plan must report them all; a second job
on verl 0.8.0 names a device no node offers; `apply` refuses the plan and nothing reaches Ray or the
shared root. A job breaking verl's limits and naming a data column its file does not have is refused
the same way (issue 39). On the real 3-GPU cluster, with verl's real wheels."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.cluster import sdk
from tests.support.verl_inputs import write_inputs
from tests.support.workspace import Workspace, make_workspace

WORKSPACE = "verl-mistakes"

CLUSTER = """
kind: Cluster
name: local
address: {address}
shared_root: .shared
nodes:
  - {{role: head, count: 1}}
  - {{role: worker, count: 1, resources: {{GPU: 3, worker_node: 1}}}}
job_defaults:
  entrypoint_num_cpus: 1
  entrypoint_resources: {{worker_node: 1}}
"""

JOB = """kind: Job
name: {name}
cluster: local
code: {code}
workload: ppo
model: ${{shared_root}}/models/qwen
data:
  train: ${{shared_root}}/datasets/gsm8k/train.parquet
  val: ${{shared_root}}/datasets/gsm8k/train.parquet
trainer:
  nnodes: 1
  n_gpus_per_node: 2
{trainer}overrides:
{overrides}"""

RUNNABLE = ["actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
            "data.train_batch_size=8", "actor_rollout_ref.actor.ppo_mini_batch_size=4",
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
            "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2", "critic.ppo_micro_batch_size_per_gpu=2"]
"""What verl's checks need of a PPO job on 2 GPUs beside its typed fields (tests/state/verl/test_verl.py's RUNNABLE)."""

MISTAKES = ["actor_rollout_ref.rollout.name=vllmm",
            "actor_rollout_ref.rollout.tensor_parallel_size=2",
            "data.train_batch_size=8",
            "actor_rollout_ref.rollout.tensor_model_parallel_size=3",
            "actor_rollout_ref.actor.ppo_mini_batch_size=4",
            # after the mini batch: a finding about both keys is located at the last override that set one
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=3",
            "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2",
            "critic.ppo_micro_batch_size_per_gpu=2",
            "reward.custom_reward_function.path=${shared_root}/rewards/missing.py",
            "trainer.val_before_trian=false",
            "algorithm.adv_estimator=gaee"]
"""RUNNABLE with one mistake per line (the micro batch is 3; the rest set right)."""

FOUND_BY_CODE = [  # (mistake, spec file, text of the line that made it, what the error starts with)
    ("typo'd key", "jobs/mistakes.yaml", "rollout.tensor_parallel_size=2",
     "no key 'actor_rollout_ref.rollout.tensor_parallel_size' in verl 0.9.1's config ppo_trainer; "
     "did you mean actor_rollout_ref.rollout.tensor_model_parallel_size"),
    ("second typo'd key", "jobs/mistakes.yaml", "trainer.val_before_trian=false",
     "no key 'trainer.val_before_trian' in verl 0.9.1's config ppo_trainer; did you mean trainer.val_before_train?"),
    ("rollout tp", "jobs/mistakes.yaml", "tensor_model_parallel_size=3",
     "the rollout's tensor x data x pipeline parallel size (3 x 1 x 1 = 3) does not divide the job's 2 GPUs"),
    ("micro batch", "jobs/mistakes.yaml", "ppo_micro_batch_size_per_gpu=3",
     "each GPU's share of a mini batch (4 x 1 / 2 = 2) is not divisible by ppo_micro_batch_size_per_gpu (3)"),
    ("rollout engine", "jobs/mistakes.yaml", "rollout.name=vllmm",
     "actor_rollout_ref.rollout.name='vllmm' is no rollout engine of verl's (it has vllm, sglang, trtllm)"),
    ("device on 0.8", "jobs/device.yaml", "device: cpu",
     "verl 0.8.0 asks Ray for a resource named 'cpu' for every GPU, which no node offers"),
    ("estimator", "jobs/mistakes.yaml", "adv_estimator=gaee",
     "algorithm.adv_estimator='gaee' is not one of verl's estimators"),
    ("logger", "jobs/mistakes.yaml", "logger: [console, wandbb]", "trainer.logger 'wandbb' is not one verl has"),
]
"""What the snapshot's code alone shows: `validate --deep` finds these as `plan` does."""
EXTRA_BY_CODE = ("rollout split", "jobs/mistakes.yaml", "tensor_model_parallel_size=3",
                 "a rollout replica of 3 GPUs cannot be split into nodes of 2 GPUs")
"""tp=3 on 2 GPUs breaks a second rule, at the same line."""


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("verl-mistakes-cache")


@pytest.fixture
def shared_cache(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One argus cache for the module: a job's Hydra composition (keyed by its code, overrides and shared
    root) is made by the first command and read by the others."""
    monkeypatch.setenv("ARGUS_CACHE_DIR", str(cache_dir))


@pytest.fixture(scope="module")
def mistakes_ws(tmp_path_factory: pytest.TempPathFactory, verl_repo: Path, gpu_cluster) -> Workspace:
    """A clean job, the job of many mistakes, and a device mistake on verl 0.8.0; one directory for the
    module, so its compositions are cached (no command here may change it: apply is refused)."""
    ws = gpu_workspace(tmp_path_factory.mktemp("verl-mistakes"), verl_repo, gpu_cluster.address, WORKSPACE)
    write_job(ws, "fits", "verl", RUNNABLE)
    write_job(ws, "mistakes", "verl", MISTAKES, trainer="  logger: [console, wandbb]\n")
    write_job(ws, "device", "verl-080", RUNNABLE, trainer="  device: cpu\n")
    return ws


@pytest.fixture
def mistakes(mistakes_ws: Workspace, shared_cache) -> Workspace:
    return mistakes_ws


def test_every_mistake_is_a_plan_error_at_the_line_that_made_it(mistakes: Workspace, argus):
    plan = argus("plan", mistakes.root)
    assert plan.code == 1, plan.out + plan.err
    assert_found(mistakes, plan.out, FOUND_BY_CODE)
    missing = f"{mistakes.shared}/rewards/missing.py"
    reward = (at(mistakes, "jobs/mistakes.yaml", "rewards/missing.py") +
              f"reward.custom_reward_function.path names {missing}, which does not exist where the run looks for it")
    assert f"Error: {reward}" in plan.out
    # every override of the job is reported in this one plan, and nothing else of it
    assert error_lines(plan.out, "jobs/mistakes.yaml") == expected_lines(mistakes, "jobs/mistakes.yaml", [
        *FOUND_BY_CODE, EXTRA_BY_CODE, ("file", "jobs/mistakes.yaml", "rewards/missing.py", "")])
    assert "To append to your config" not in plan.out + plan.err  # Hydra's advice, wrong for a typo
    assert "Error: jobs/fits.yaml" not in plan.out


def test_apply_refuses_the_plan_and_nothing_reaches_ray_or_the_shared_root(mistakes: Workspace, argus):
    applied = argus("apply", "--auto-approve", mistakes.root)
    assert applied.code == 1, applied.out + applied.err
    assert_found(mistakes, applied.out, FOUND_BY_CODE)
    planned = re.findall(r"step: (?:submit|queue) (\S+) (?:to|on) cluster local", applied.out)
    assert len(planned) == 3, applied.out  # the clean job's submit too: a plan with errors is refused whole
    on_ray = sdk(mistakes.address).list_jobs()  # GET /api/jobs/
    assert [j.submission_id for j in on_ray if (j.metadata or {}).get("argus.workspace") == WORKSPACE] == []
    assert not set(planned) & {j.submission_id for j in on_ray}
    paths = [p.relative_to(mistakes.shared).as_posix() for p in mistakes.shared.rglob("*")]
    assert not [p for p in paths if any(sid in p for sid in planned)]  # no run directory, record or queue entry
    written = sorted(p for p in paths if (mistakes.shared / p).is_file() and not p.startswith(".argus/"))
    assert written == ["datasets/gsm8k/train.parquet", "models/qwen/config.json",
                       "models/qwen/tokenizer_config.json"]  # nor a code snapshot
    assert not (mistakes.shared / "jobs").exists()


def test_validate_deep_finds_what_the_code_shows_at_the_same_lines(mistakes: Workspace, argus):
    result = argus("validate", "--deep", mistakes.root)
    assert result.code == 1, result.out + result.err
    assert_found(mistakes, result.out, FOUND_BY_CODE)
    assert error_lines(result.out, "jobs/mistakes.yaml") == expected_lines(
        mistakes, "jobs/mistakes.yaml", [*FOUND_BY_CODE, EXTRA_BY_CODE])
    assert "missing.py" not in result.out  # files are the shared root's: only `argus plan` reads them


def test_a_checkpoint_of_another_world_size_is_refused_before_submit(tmp_path: Path, verl_repo: Path, gpu_cluster,
                                                                     shared_cache, argus):
    ws = gpu_workspace(tmp_path, verl_repo, gpu_cluster.address, "verl-mistakes-resume")
    run = ws.shared / "outputs" / "checkpoints" / "ppo-on-4" / "run-1"
    step = save_fsdp_checkpoint(run, step=10, world_size=4)
    write_job(ws, "resumes", "verl", [*RUNNABLE, "trainer.resume_mode=resume_path",
                                      "trainer.resume_from_path=${shared_root}/outputs/checkpoints/ppo-on-4/run-1/"
                                      "global_step_10"])
    plan = argus("plan", ws.root)
    assert plan.code == 1, plan.out + plan.err
    # located at the override that named the checkpoint
    where = at(ws, "jobs/resumes.yaml", "trainer.resume_from_path=")
    assert f"Error: {where}job.resumes's trainer.resume_from_path {step} was " \
           "saved by 4 GPUs (model_world_size_4), but the job now has 2 (trainer.nnodes x n_gpus_per_node): verl " \
           "cannot load shards of another world size" in plan.out
    assert "would resume from" in plan.out and "saved by 4 GPUs" in plan.out


def test_a_resume_path_finding_is_located_at_the_override_that_named_the_path(tmp_path: Path):
    from reconcile.plan.jobs import plan_job
    from reconcile.plan.verl import resume_diagnostics
    from specs.load.loader import load_workspace
    from specs.workloads.submission import resolve
    from state.observed import ObservedState
    from state.runs.checkpoints import inspect_step

    ws = make_workspace(tmp_path / "ws", "resume-where", "http://127.0.0.1:9")
    step = save_fsdp_checkpoint(ws.shared / "old" / "run-1", step=10, world_size=4)
    write_job(ws, "resumes", "verl", ["trainer.resume_mode=resume_path", f"trainer.resume_from_path={step}"])
    ws.write("code.yaml", "kind: CodeSnapshot\nname: verl\ncluster: local\ngit: {url: /nowhere, ref: v0.9.1}\n")
    desired = load_workspace(ws.root)
    job = desired.jobs["resumes"]
    start = plan_job(job, resolve(desired.workspace, desired.cluster_of(job), job), [])
    seen = ObservedState(clusters={}, records={}, checkpoints={"resumes": inspect_step(step)}, verl_profiles={})
    [error] = resume_diagnostics(desired, seen, [start])
    assert "was saved by 4 GPUs" in error.message
    assert f"{error.where.file}:{error.where.line}: " == at(ws, "jobs/resumes.yaml", "trainer.resume_from_path=")


LIMITS_WORKSPACE = "verl-limits-cli"
LIMITS = [*RUNNABLE, "actor_rollout_ref.rollout.gpu_memory_utilization=1.5", "data.prompt_key=question",
            "actor_rollout_ref.rollout.n=2.5", "actor_rollout_ref.model.lora_rank=1024"]


def test_limits_and_columns_refuse_the_plan_and_nothing_reaches_ray(tmp_path: Path, verl_repo: Path, gpu_cluster,
                                                                     argus, monkeypatch):
    monkeypatch.setenv("ARGUS_CACHE_DIR", str(tmp_path / "cache"))
    ws = gpu_workspace(tmp_path, verl_repo, gpu_cluster.address, LIMITS_WORKSPACE)
    write_job(ws, "limits", "verl", LIMITS)
    data = f"{ws.shared}/datasets/gsm8k/train.parquet"
    expected = [
        ("gpu_memory_utilization=1.5", "actor_rollout_ref.rollout.gpu_memory_utilization=1.5: vLLM takes a fraction"),
        ("data.prompt_key=question", f"data.prompt_key='question' is not a column of {data} (it has data_source, "
                                     "prompt, reward_model)"),
        ("rollout.n=2.5", "actor_rollout_ref.rollout.n=2.5: verl's RolloutConfig.n is a whole number"),
        ("lora_rank=1024", "actor_rollout_ref.model.lora_rank=1024: verl passes the LoRA rank to vLLM"),
    ]
    for command in (["plan"], ["apply", "--auto-approve"]):
        result = argus(*command, ws.root)
        assert result.code == 1, result.out + result.err
        for line, message in expected:  # every one of the job's mistakes, in one run
            assert f"Error: {at(ws, 'jobs/limits.yaml', line)}{message}" in result.out, (message, result.out)
    on_ray = sdk(ws.address).list_jobs()
    assert [j.submission_id for j in on_ray if (j.metadata or {}).get("argus.workspace") == LIMITS_WORKSPACE] == []
    assert not (ws.shared / "jobs").exists()


def gpu_workspace(tmp_path: Path, verl_repo: Path, address: str, name: str) -> Workspace:
    """The 3-GPU cluster, verl 0.9.1 and 0.8.0, and the data and model the jobs name."""
    ws = make_workspace(tmp_path / "ws", name, address)
    ws.write("cluster.yaml", CLUSTER.format(address=address))
    ws.write("code.yaml", "".join(f"---\nkind: CodeSnapshot\nname: {snapshot}\ncluster: local\n"
                                  f"git: {{url: {verl_repo}, ref: {ref}}}\n"
                                  for snapshot, ref in (("verl", "v0.9.1"), ("verl-080", "v0.8.0"))))
    write_inputs(ws.shared, "datasets/gsm8k/train.parquet", "models/qwen")
    return ws


def write_job(ws: Workspace, name: str, code: str, overrides: list[str], trainer: str = "") -> None:
    ws.write(f"jobs/{name}.yaml", JOB.format(name=name, code=code, trainer=trainer,
                                             overrides="".join(f"  - {o}\n" for o in overrides)))


def save_fsdp_checkpoint(run: Path, step: int, world_size: int) -> Path:
    """What verl's FSDP actor saves at a step: every rank's model, optimizer and extra state, then the tracker."""
    actor = run / f"global_step_{step}" / "actor"
    actor.mkdir(parents=True)
    for kind in ("model", "optim", "extra_state"):
        for rank in range(world_size):
            (actor / f"{kind}_world_size_{world_size}_rank_{rank}.pt").write_bytes(b"x")
    (run / "latest_checkpointed_iteration.txt").write_text(str(step))
    return actor.parent


def at(ws: Workspace, rel: str, text: str) -> str:
    """`file:LINE: ` of the one line of the spec file holding `text`."""
    lines = (ws.root / rel).read_text().splitlines()
    [line] = [number for number, content in enumerate(lines, 1) if text in content]
    return f"{rel}:{line}: "


def assert_found(ws: Workspace, out: str, found: list[tuple[str, str, str, str]]) -> None:
    for mistake, rel, text, message in found:
        assert f"Error: {at(ws, rel, text)}{message}" in out, f"{mistake}: {message!r} not at {text!r}\n{out}"


def error_lines(out: str, rel: str) -> list[int]:
    return sorted(int(n) for n in re.findall(rf"^Error: {re.escape(rel)}:(\d+): ", out, re.MULTILINE))


def expected_lines(ws: Workspace, rel: str, found: list[tuple]) -> list[int]:
    return sorted(int(at(ws, rel, text).split(":")[1]) for _, where, text, *_ in found if where == rel)

