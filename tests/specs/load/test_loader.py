"""Every loader problem is reported with file:line and field path, all of them at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from specs.diagnostics import Where
from specs.errors import ArgusError, SpecError
from specs.load.loader import load_workspace
from tests.support.workspace import Workspace


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    ws = Workspace(tmp_path, "team", "http://127.0.0.1:1")
    ws.write("argus.yaml", "kind: Workspace\nname: team\n")
    ws.write("clusters/c.yaml", """
        kind: Cluster
        name: h20
        address: http://10.0.0.1:8265
        shared_root: /mnt/shared
        job_defaults:
          entrypoint_num_cpus: 1
          entrypoint_resources: {worker_node: 1}
        """)
    return ws


def diagnostics(ws: Workspace) -> list[str]:
    with pytest.raises(SpecError) as caught:
        load_workspace(ws.root)
    return [str(d) for d in caught.value.diagnostics]


def test_a_valid_workspace_loads_with_defaults_and_positions(ws: Workspace) -> None:
    ws.write("jobs/a.yaml", """
        kind: Job
        name: ppo
        cluster: h20
        workload: command
        entrypoint: [python3, train.py]
        """)
    desired = load_workspace(ws.root)
    assert desired.workspace.name == "team"
    assert desired.jobs["ppo"].run == 1 and desired.jobs["ppo"].state == "running"
    assert desired.source("job.ppo").at("entrypoint") == Where("jobs/a.yaml", 5)


def test_every_kind_of_problem_is_reported_together(ws: Workspace) -> None:
    ws.write("jobs/bad.yaml", """
        kind: Job
        name: Bad_Name
        cluster: h20
        workload: command
        entrypoint: [python3]
        entrypont: typo
        protect: maybe
        ---
        kind: Job
        name: orphan
        cluster: nowhere
        workload: command
        entrypoint: echo
        ---
        kind: Job
        name: incomplete
        cluster: h20
        workload: command
        """)
    ws.write("jobs/dup.yaml", """
        kind: Job
        name: orphan
        cluster: h20
        workload: command
        entrypoint: echo again
        """)
    ws.write("broken.yml", "kind: Job\nname: [unclosed\n")
    ws.write("weird.yaml", "kind: Gizmo\nname: x\n")
    found = diagnostics(ws)
    assert found == [
        "broken.yml:2: invalid YAML: expected ',' or ']', but got '<stream end>'",
        "jobs/bad.yaml:2: name: invalid name 'Bad_Name': use lowercase letters, digits and '-', at most 63",
        "jobs/bad.yaml:6: entrypont: unknown key (did you mean 'entrypoint'?); allowed keys: kind, name, "
        "cluster, workload, code, entrypoint, model, data, trainer, entry, overrides, description, env, "
        "entrypoint_num_cpus, entrypoint_num_gpus, "
        "entrypoint_memory, entrypoint_resources, state, protect, run, retry, on_drift, priority, preemptible, demand, "
        "max_runtime, after, rerun_with_predecessors, health",
        "jobs/bad.yaml:7: protect: Input should be a valid boolean",
        "jobs/bad.yaml:11: cluster: no Cluster named 'nowhere' (known: h20)",
        "jobs/bad.yaml:15: entrypoint: `workload: command` needs an `entrypoint`",
        "jobs/dup.yaml:2: name: duplicate Job 'orphan' (first defined at jobs/bad.yaml:10)",
        "weird.yaml:1: kind: got 'Gizmo'; expected one of Workspace, Cluster, CodeSnapshot, Job, Quotas, Dataset, "
        "Model",
    ]


def test_wrong_types_point_at_the_nested_field(ws: Workspace) -> None:
    ws.write("clusters/c.yaml", """
        kind: Cluster
        name: h20
        address: 10.0.0.1:8265
        shared_root: /mnt/shared
        nodes:
          - {role: head, count: 1}
          - {role: worker, count: two}
        job_defaults:
          entrypoint_resources: {worker_node: lots}
        """)
    found = diagnostics(ws)
    assert any(p.startswith("clusters/c.yaml:3: address: Value error, must be the dashboard URL") for p in found)
    count_error = "nodes.1.count: Input should be a valid integer, unable to parse string as an integer"
    assert f"clusters/c.yaml:7: {count_error}" in found
    assert any(p.startswith("clusters/c.yaml:9: job_defaults.entrypoint_resources.worker_node:") for p in found)


@pytest.mark.parametrize("layout", ["block", "flow"])
def test_a_key_with_a_dot_is_located_at_its_own_line_not_at_the_field_it_reads_like(ws: Workspace, layout: str):
    # `env.A` and `env: {A: }` share the dotted path env.A: the error is the first one's, on line 5
    env = "env:\n  A: fine\n" if layout == "block" else "env: {A: fine}\n"
    ws.write("jobs/a.yaml", f"kind: Job\nname: a\ncluster: h20\nworkload: command\nenv.A: oops\n"
                            f"entrypoint: [x]\n{env}")
    [found] = diagnostics(ws)
    assert found.startswith("jobs/a.yaml:5: env.A: unknown key")


def test_a_literal_secret_under_an_empty_key_is_found(ws: Workspace) -> None:
    ws.write("jobs/a.yaml", 'kind: Job\nname: a\ncluster: h20\nworkload: command\nentrypoint: [x]\n'
                            '"": ghp_abcdefghijklmnopqrstuvwxyz0123456789\n')
    found = diagnostics(ws)
    assert any(d.startswith("jobs/a.yaml:6") and "GitHub" in d for d in found), found
    assert not any("ghp_abcdefghijklmnopqrstuvwxyz0123456789" in d for d in found)


@pytest.mark.parametrize("where", ["top", "env"])
def test_a_token_written_as_a_key_is_found_and_never_printed(ws: Workspace, where: str) -> None:
    token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
    line = f"{token}: x\n" if where == "top" else f"env:\n  {token}: x\n"
    ws.write("jobs/a.yaml", f"kind: Job\nname: a\ncluster: h20\nworkload: command\nentrypoint: [x]\n{line}")
    found = diagnostics(ws)
    assert any("this key looks like a GitHub token" in d for d in found), found
    assert not any(token in d for d in found), found  # neither in a message nor in a field's path
    assert not any(token[:12] in d for d in found), found


def test_entrypoint_of_the_wrong_type_gives_one_merged_message(ws: Workspace) -> None:
    ws.write("jobs/a.yaml", "kind: Job\nname: a\ncluster: h20\nworkload: command\nentrypoint: 5\n")
    assert diagnostics(ws) == [
        "jobs/a.yaml:5: entrypoint: Input should be a valid list or Input should be a valid string"]


def test_workspace_rules(ws: Workspace) -> None:
    ws.write("more/team.yaml", "kind: Workspace\nname: second\n")
    assert diagnostics(ws) == ["more/team.yaml:1: kind: the Workspace belongs in argus.yaml at the workspace root"]


def test_a_nested_workspace_is_not_read(ws: Workspace) -> None:
    ws.write("other/argus.yaml", "kind: Workspace\nname: other\n")
    ws.write("other/jobs/a.yaml", "kind: Job\nname: not-ours\ncluster: nowhere\nworkload: command\nentrypoint: x\n")
    assert load_workspace(ws.root).jobs == {}


def test_a_directory_without_argus_yaml_is_not_a_workspace(tmp_path: Path) -> None:
    with pytest.raises(ArgusError, match="argus.yaml is missing"):
        load_workspace(tmp_path)


def test_hidden_directories_are_not_read(ws: Workspace) -> None:
    ws.write(".shared/junk.yaml", "not: [valid")
    assert load_workspace(ws.root).workspace.name == "team"


def test_relative_shared_root_is_under_the_workspace(ws: Workspace) -> None:
    ws.write("clusters/c.yaml", "kind: Cluster\nname: h20\naddress: http://x:1\nshared_root: .shared\n")
    assert load_workspace(ws.root).shared_root("h20") == str(ws.root.resolve() / ".shared")


def test_awkward_yaml_is_reported_not_crashed_on(ws: Workspace) -> None:
    ws.write("jobs/merge.yaml", """
        base: &base {cluster: h20, workload: command}
        ---
        kind: Job
        name: merged
        <<: {cluster: h20, workload: command, bogus: 1}
        entrypoint: echo
        """)
    ws.write("jobs/keys.yaml", "kind: Job\nname: k\ncluster: h20\nworkload: command\nentrypoint: x\nenv: {1: one}\n")
    ws.write("jobs/latin1.yaml", "kind: Job\n")
    (ws.root / "jobs/latin1.yaml").write_bytes(b"kind: Job\nname: caf\xe9\n")
    (ws.root / "jobs/dangling.yaml").symlink_to(ws.root / "nowhere.yaml")
    found = diagnostics(ws)
    assert ("jobs/dangling.yaml:1: a symlink to nowhere.yaml, which does not exist (or loops): fix or remove the "
            "link") in found
    assert "jobs/keys.yaml:6: env.1: keys must be strings" in found
    assert "jobs/latin1.yaml:2: not UTF-8 text (byte 19): save the file as UTF-8" in found
    assert "jobs/merge.yaml:1: a resource must be a mapping with a `kind:` key" not in found
    assert any(p.startswith("jobs/merge.yaml:3: bogus: unknown key") for p in found), found
    assert any(p.startswith("jobs/merge.yaml:1: kind: missing") for p in found), found


def test_strict_values(ws: Workspace) -> None:
    ws.write("jobs/a.yaml", """
        kind: Job
        name: a
        cluster: h20
        workload: command
        entrypoint: []
        run: true
        entrypoint_num_cpus: .inf
        env: {TOKEN: "Bearer ${env:TOKEN}"}
        """)
    found = diagnostics(ws)
    assert any(p.startswith("jobs/a.yaml:5: entrypoint: List should have at least 1 item") for p in found), found
    assert "jobs/a.yaml:6: run: Input should be a valid integer" in found
    assert "jobs/a.yaml:7: entrypoint_num_cpus: Input should be a finite number" in found
    assert any(p.startswith("jobs/a.yaml:8: env: Value error, TOKEN: `${env:NAME}` must be the whole value")
               for p in found), found


def test_a_literal_secret_is_refused(ws: Workspace) -> None:
    ws.write("jobs/a.yaml", "kind: Job\nname: a\ncluster: h20\nworkload: command\nentrypoint: x\n"
                            "env: {WANDB_API_KEY: abc123}\n")
    [problem] = diagnostics(ws)
    assert problem.startswith("jobs/a.yaml:6: env.WANDB_API_KEY: WANDB_API_KEY looks like a secret: "
                              "write `WANDB_API_KEY: ${env:WANDB_API_KEY}`")
    assert "abc123" not in problem


def test_a_secret_named_like_the_wrappers_or_the_shells_variables_is_refused_at_load(ws: Workspace) -> None:
    ws.write("jobs/a.yaml", "kind: Job\nname: a\ncluster: h20\nworkload: command\nentrypoint: x\n"
                            "env: {IFS: '${env:A_TOKEN}', c: '${env:B_TOKEN}', OK_TOKEN: '${env:C_TOKEN}'}\n")
    [problem] = diagnostics(ws)
    assert problem.startswith("jobs/a.yaml:6: env: Value error, 'IFS': a variable that takes a secret") or \
        problem.startswith("jobs/a.yaml:6: env: Value error, 'c': a variable that takes a secret"), problem


def test_an_invalid_workspace_is_reported_once(ws: Workspace) -> None:
    ws.write("argus.yaml", "kind: Workspace\nname: Team\n")
    assert diagnostics(ws) == [
        "argus.yaml:2: name: invalid name 'Team': use lowercase letters, digits and '-', at most 63"]


def test_verl_jobs_need_their_fields_and_keep_argus_keys(ws: Workspace) -> None:
    ws.write("code.yaml", "kind: CodeSnapshot\nname: verl\ncluster: h20\ngit: {url: /v, ref: v1}\n")
    ws.write("jobs/v.yaml", """
        kind: Job
        name: grpo
        cluster: h20
        code: verl
        workload: grpo
        model: /mnt/shared/models/q
        data: {train: data/train.parquet}
        trainer: {total_training_steps: 5, total_epochs: 1}   # both, as verl takes them
        overrides: [algorithm.adv_estimator=rloo, trainer.nnodes=2]
        ---
        kind: Job
        name: ppo
        cluster: h20
        workload: ppo
        entrypoint: [python3]
        data: {train: /mnt/shared/t.parquet, val: /mnt/shared/v.parquet}
        overrides: [algorithm.adv_estimator=rloo]
        """)
    assert diagnostics(ws) == [
        "jobs/v.yaml:7: data: PPO and GRPO validate on `data.val`: without it verl reads its own default path",
        "jobs/v.yaml:7: data.train: 'data/train.parquet' must be on the shared filesystem: `${shared_root}/...` or "
        "an absolute path (a job runs inside its read-only code snapshot); or name a Dataset or Model: "
        "`${dataset:NAME}/train.parquet`",
        "jobs/v.yaml:9: overrides.0: 'algorithm.adv_estimator=rloo' sets a key argus types: use `workload: grpo` "
        "instead",
        "jobs/v.yaml:9: overrides.1: 'trainer.nnodes=2' sets a key argus types: use `trainer.nnodes` instead",
        "jobs/v.yaml:11: code: `workload: ppo` needs `code`",
        "jobs/v.yaml:11: model: `workload: ppo` needs `model`",
        "jobs/v.yaml:15: entrypoint: `workload: ppo` builds its own entrypoint (verl); put extra Hydra settings "
        "in `overrides:`",
    ]


def test_names_that_could_escape_the_shared_root_are_rejected(ws: Workspace) -> None:
    ws.write("code.yaml", "kind: CodeSnapshot\nname: ../../etc\ncluster: h20\nrepo: /abs\npath: /srv/x\n")
    found = diagnostics(ws)
    assert any(p.startswith("code.yaml:2: name: invalid name '../../etc'") for p in found), found
    assert any(p.startswith("code.yaml:4: repo: String should match pattern") for p in found), found


def test_five_thousand_job_files_load(ws: Workspace) -> None:
    """The total is bounded (specs/parse/reading.py), far above what a real workspace holds."""
    (ws.root / "jobs").mkdir()
    for i in range(5000):
        (ws.root / "jobs" / f"j{i}.yaml").write_text(
            f"kind: Job\nname: j{i}\ncluster: h20\nworkload: command\nentrypoint: [python3, train.py]\n")
    assert len(load_workspace(ws.root).jobs) == 5000


def test_a_resource_that_fails_validation_has_its_references_checked_in_the_same_run(ws: Workspace) -> None:
    ws.write("jobs/j.yaml", """
        kind: Job
        name: broken
        cluster: nowhere
        code: nothing
        workload: command
        entrypoint: [echo]
        entrypont: typo
        """)
    found = diagnostics(ws)
    assert any(p.startswith("jobs/j.yaml:7: entrypont: unknown key") for p in found), found
    assert "jobs/j.yaml:3: cluster: no Cluster named 'nowhere' (known: h20)" in found
    assert "jobs/j.yaml:4: code: no CodeSnapshot named 'nothing' (known: none defined)" in found
