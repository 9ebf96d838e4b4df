"""A pull request writes the spec and names the code; a job can write a materialized snapshot. Neither may
make a plan read the machine argus runs on (its environment, its files), hang it, crash it, or change the
GPUs argus counts and the directories it keeps. Each test asserts the harm itself never happens."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specs.load.loader import load_workspace
from state.code.sources import resolve_source
from state.memo import DIRECTORY, Memo
from state.observed import SnapshotState
from state.verl.checks import JobCheck, check_job
from tests.support.workspace import make_workspace

GRPO = """kind: Job
name: {name}
cluster: local
code: {code}
workload: grpo
model: /models/q
data: {{train: /data/t.parquet, val: /data/v.parquet}}
trainer: {{nnodes: 1, n_gpus_per_node: 8}}
{entry}overrides:
  - actor_rollout_ref.rollout.name=vllm
  - actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4
  - actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4
{extra}"""


@pytest.fixture(scope="module")
def hostile_repo(verl_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """verl 0.9.1 with hostile recipes beside it: tags bomb, climb, global, logger, deep."""
    repo = tmp_path_factory.mktemp("hostile") / "verl"
    subprocess.run(["git", "clone", "-q", str(verl_repo), str(repo)], check=True)
    outside = repo.parent / "outside.yaml"
    outside.write_text("registry: {password: S3CR3T-OUTSIDE}\n")
    recipes = {
        "bomb": {"config/bomb.yaml": "defaults: [ppo_trainer, _self_]\nhydra: {searchpath: [file://verl/trainer/config]}\n"
                                     "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                                     "c: [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n"},
        "climb": {"config/climb.yaml": "hydra: {searchpath: [file://verl/trainer/config]}\n"
                                       "defaults:\n  - ppo_trainer\n  - rollout@leak: " + "../" * 12
                                       + str(outside.with_suffix("")).lstrip("/") + "\n  - _self_\n"},
        "global": {"config/global.yaml": "hydra: {searchpath: [file://verl/trainer/config]}\n"
                                         "defaults: [ppo_trainer, {sneak: big}, _self_]\n",
                   "config/sneak/big.yaml": "# @package _global_\ntrainer: {nnodes: 4}\n"},
        "logger": {"config/logger.yaml": "hydra: {searchpath: [file://verl/trainer/config]}\n"
                                         "defaults: [ppo_trainer, _self_]\ntrainer: {logger: 5}\n"},
        "deep": {"config/deep.yaml": "hydra: {searchpath: [file://verl/trainer/config]}\n"
                                     "defaults: [ppo_trainer, _self_]\n",
                 "config/extra/nested.yaml": "a: " + "[" * 900 + "]" * 900 + "\n"},  # libyaml scans it; Python
                                                                                     # cannot build it
    }
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@localhost"]
    for tag, files in recipes.items():
        subprocess.run([*git, "checkout", "-q", "v0.9.1"], check=True)
        for rel, text in {**files, "main.py": f"import hydra\n\n@hydra.main(config_path='config', config_name="
                                              f"'{tag}')\ndef main(c): ...\n"}.items():
            (repo / "recipe" / tag / rel).parent.mkdir(parents=True, exist_ok=True)
            (repo / "recipe" / tag / rel).write_text(text)
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-qm", tag], check=True)
        subprocess.run([*git, "tag", tag], check=True)
    return repo


def checked(tmp_path: Path, repo: Path, ref: str, job_text: str) -> JobCheck:
    ws = make_workspace(tmp_path / "ws", "attacks", "http://127.0.0.1:9")
    ws.write("code.yaml", f"kind: CodeSnapshot\nname: code\ncluster: local\ngit: {{url: {repo}, ref: {ref}}}\n")
    ws.write("jobs/j.yaml", job_text)
    desired = load_workspace(ws.root)
    source = resolve_source(desired.snapshots["code"], desired.root, str(tmp_path / "cache"), 60)
    memo = Memo(tmp_path / "cache", "attacks")  # as a plan keeps what it composed (state.memo)
    found = check_job(desired, desired.jobs["j"], SnapshotState(source=source), str(tmp_path / "cache"), files=False,
                      memo=memo)
    memo.save()
    return found


def recipe(tag: str) -> str:
    return f"entry: {{module: recipe.{tag}.main}}\n"


def test_the_runners_environment_never_reaches_the_plan_or_the_cache(tmp_path, verl_repo, monkeypatch, argus):
    monkeypatch.setenv("RUNNER_SECRET", "hunter2-s3cr3t")
    extra = "  - actor_rollout_ref.rollout.tensor_model_parallel_size=${oc.env:RUNNER_SECRET}\n" \
            "  - trainer.val_before_train=${oc.env:RUNNER_SECRET}\n"
    result = checked(tmp_path, verl_repo, "v0.9.1", GRPO.format(name="j", code="code", entry="", extra=extra))
    texts = " ".join(d.text for d in result.diagnostics)
    assert "hunter2" not in texts and "read from the environment at run time: RUNNER_SECRET" in texts
    cached = [p.read_bytes() for p in (tmp_path / "cache" / DIRECTORY).rglob("*.pack")]
    assert cached and not any(b"hunter2" in data for data in cached)


@pytest.mark.parametrize("override", ["+rollout@leak=../../../../../../../../tmp/x", "rollout=/etc/passwd",
                                      "trainer={nnodes: 4}", "~trainer", "trainer=null", "+grp@trainer=x",
                                      "+x@_global_=y", "hydra={run: {dir: /tmp/x}}", "data={train_files: [/x]}"])
def test_an_override_that_reaches_outside_or_replaces_what_argus_sets_is_refused(tmp_path, override, argus):
    ws = make_workspace(tmp_path / "ws", "attacks", "http://127.0.0.1:9")
    ws.write("code.yaml", "kind: CodeSnapshot\nname: code\ncluster: local\ngit: {url: /nowhere, ref: v1}\n")
    ws.write("jobs/j.yaml", GRPO.format(name="j", code="code", entry="", extra=f"  - {override!r}\n"))
    result = argus("validate", ws.root)
    assert result.code == 1
    assert f"jobs/j.yaml:13: overrides.3: {override!r} " in result.err, result.err


def test_a_config_climbing_out_of_the_snapshot_is_never_read(tmp_path, hostile_repo):
    result = checked(tmp_path, hostile_repo, "climb", GRPO.format(name="j", code="code", entry=recipe("climb"),
                                                                  extra=""))
    texts = [d.text for d in result.diagnostics]
    assert any("in its defaults, outside the config folder" in t for t in texts), texts
    assert not any("S3CR3T" in t for t in texts) and result.profile is None


def test_a_yaml_alias_bomb_in_a_snapshot_is_refused_at_once(tmp_path, hostile_repo):
    started = time.monotonic()
    result = checked(tmp_path, hostile_repo, "bomb", GRPO.format(name="j", code="code", entry=recipe("bomb"), extra=""))
    assert any("uses a YAML alias" in d.text for d in result.diagnostics)
    assert time.monotonic() - started < 30  # the composition it would have hung in never started


def test_a_config_nested_beyond_what_python_builds_is_a_finding_not_a_crash(tmp_path, hostile_repo):
    result = checked(tmp_path, hostile_repo, "deep", GRPO.format(name="j", code="code", entry=recipe("deep"), extra=""))
    assert any("config/extra/nested.yaml nests deeper than Hydra can read" in d.text for d in result.diagnostics), \
        result.diagnostics
    assert result.profile is None


def test_a_config_group_merged_globally_cannot_change_the_gpus_argus_counts(tmp_path, hostile_repo):
    result = checked(tmp_path, hostile_repo, "global", GRPO.format(name="j", code="code", entry=recipe("global"),
                                                                   extra=""))
    # argus's overrides are applied over every config (and the composed values are checked against them)
    assert result.profile is not None and [(p.nnodes, p.gpus_per_node) for p in result.profile.pools] == [(1, 8)]
    # (a recipe argus has not read is told its demand counts only the trainer's pool: a warning, not this)
    assert not any("trainer.nnodes" in d.text for d in result.diagnostics if d.severity == "error")


def test_a_snapshot_config_of_an_unexpected_shape_is_a_finding_not_a_crash(tmp_path, hostile_repo):
    result = checked(tmp_path, hostile_repo, "logger", GRPO.format(name="j", code="code", entry=recipe("logger"),
                                                                   extra=""))
    assert any("trainer.logger is 5" in d.text for d in result.diagnostics)


def test_torchrun_processes_cannot_be_left_without_their_gpus(tmp_path, argus):
    ws = make_workspace(tmp_path / "ws", "attacks", "http://127.0.0.1:9")
    ws.write("code.yaml", "kind: CodeSnapshot\nname: code\ncluster: local\ngit: {url: /nowhere, ref: v1}\n")
    ws.write("jobs/j.yaml", "kind: Job\nname: j\ncluster: local\ncode: code\nworkload: sft\nmodel: /m\n"
                            "data: {train: /d.parquet}\ntrainer: {n_gpus_per_node: 8}\nentry: {launcher: torchrun}\n"
                            "entrypoint_num_gpus: 0\n")
    result = argus("validate", ws.root)
    assert result.code == 1 and "jobs/j.yaml:10: entrypoint_num_gpus: torchrun runs 8 processes" in result.err


def test_hydra_plugins_in_the_working_directory_are_never_imported(tmp_path, verl_repo):
    """`python -m` puts the working directory first on sys.path, and Hydra imports every `hydra_plugins`
    module it finds there: a workspace (a pull request's files) could hold one."""
    ws = make_workspace(tmp_path / "ws", "attacks", "http://127.0.0.1:9")
    ws.write("code.yaml", f"kind: CodeSnapshot\nname: code\ncluster: local\ngit: {{url: {verl_repo}, ref: v0.9.1}}\n")
    ws.write("jobs/j.yaml", GRPO.format(name="j", code="code", entry="", extra=""))
    marker = tmp_path / "imported"
    (ws.root / "hydra_plugins").mkdir()
    (ws.root / "hydra_plugins" / "evil.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    env = {**os.environ, "ARGUS_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-m", "reconcile.cli", "validate", "--deep", str(ws.root)], cwd=ws.root,
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Deep: 1 verl job(s) compose" in done.stdout
    assert not marker.exists()
