"""What a job may read from argus's environment: never a variable argus holds for itself, and otherwise only
what the Workspace's `secrets:` lists. Every refusal names the file and line of the reference (or of the
list's entry) and what to do; all of them are reported at once."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from specs.errors import SpecError
from specs.kinds import held_variables
from specs.load.loader import load_workspace
from specs.schema.schema_rules import HELD_NAME
from state.root_key import KEY_VARIABLES
from tests.support.workspace import Workspace, make_workspace

HELD = [*KEY_VARIABLES, "ARGUS_NOTIFY", "argus_root_key", "GIT_TOKEN_GITHUB_COM", "PROD_RAY_TOKEN", "RAY_AUTH_TOKEN",
        "ray_proxy_cookie", "PROD_RAY_PROXY_HEADER", "OPS_NOTIFY_URL", "SLACK_WEBHOOK_URL"]
"""argus's keys, its git and dashboard credentials, its notification URLs: each shape, each case."""
FREE = ["WANDB_API_KEY", "HF_TOKEN", "OPENAI_API_KEY", "RAYON_THREADS", "MY_GIT_TOKEN", "GIT_TOKEN", "ARGUS",
        "X_ARGUS_Y", "TRAYS", "AWS_SECRET_ACCESS_KEY"]
"""Names a job may be allowed to read."""


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return make_workspace(tmp_path / "ws", "team", "http://127.0.0.1:9", secrets=("WANDB_API_KEY",))


def problems(ws: Workspace) -> list[str]:
    with pytest.raises(SpecError) as caught:
        load_workspace(ws.root)
    return [str(d) for d in caught.value.diagnostics]


@pytest.mark.parametrize("name", HELD)
def test_a_job_never_names_a_variable_argus_holds(ws, name):
    ws.job("a", "x", extra=f"env:\n  MODE: fast\n  K: '${{env:{name}}}'\n")
    [problem] = problems(ws)
    assert problem.startswith(f"jobs/a.yaml:8: env.K: Value error, {name} is one of "), problem
    assert "argus holds these for itself and never hands one to a job" in problem


@pytest.mark.parametrize("name", HELD)
def test_the_allow_list_never_names_a_variable_argus_holds(ws, name):
    ws.allow("WANDB_API_KEY", name)
    [problem] = problems(ws)
    assert problem.startswith(f"argus.yaml:3: secrets.1: Value error, {name} is one of "), problem


def test_a_clusters_job_defaults_never_name_one_either(ws):
    ws.write("cluster.yaml", "kind: Cluster\nname: local\naddress: http://127.0.0.1:9\nshared_root: .shared\n"
                             "job_defaults:\n  env:\n    HF_HOME: /mnt/hf\n    KEY: ${env:ARGUS_ROOT_KEY}\n")
    [problem] = problems(ws)
    assert problem.startswith("cluster.yaml:8: job_defaults.env.KEY: Value error, ARGUS_ROOT_KEY is one of "
                              "argus's own variables"), problem


def test_a_variable_not_listed_is_refused_where_it_is_named_and_the_error_says_how_to_allow_it(ws):
    ws.write("cluster.yaml", "kind: Cluster\nname: local\naddress: http://127.0.0.1:9\nshared_root: .shared\n"
                             "job_defaults:\n  env: {HUB: '${env:HF_TOKEN}'}\n")
    ws.job("a", "x", extra="env:\n  W: ${env:WANDB_API_KEY}\n  O: ${env:OPENAI_API_KEY}\n")
    ws.job("b", "x", extra="env: {O: '${env:OPENAI_API_KEY}'}\n")
    found = problems(ws)
    assert [p.split(": `")[0] for p in found] == ["cluster.yaml:6: job_defaults.env.HUB", "jobs/a.yaml:8: env.O",
                                                  "jobs/b.yaml:6: env.O"], found
    assert "`${env:HF_TOKEN}` names a variable the workspace does not let its jobs read" in found[0]
    assert "add it to the Workspace's list in argus.yaml (`secrets: [WANDB_API_KEY, HF_TOKEN]`)" in found[0]
    assert "`secrets: [WANDB_API_KEY, OPENAI_API_KEY]`" in found[1]


def test_listed_variables_and_plain_values_pass(ws):
    ws.allow(*FREE)
    refs = ", ".join(f"V{i}: '${{env:{name}}}'" for i, name in enumerate(FREE))
    ws.job("a", "x", extra=f"env: {{{refs}, PLAIN: '/mnt/shared/ARGUS_ROOT_KEY', SHELL: '$ARGUS_X'}}\n")
    assert load_workspace(ws.root).workspace.secrets == FREE


def test_no_list_means_no_job_reads_the_environment(tmp_path):
    ws = make_workspace(tmp_path / "ws", "team", "http://127.0.0.1:9")
    ws.job("a", "x", extra="env: {W: '${env:WANDB_API_KEY}'}\n")
    [problem] = problems(ws)
    assert problem.startswith("jobs/a.yaml:6: env.W: `${env:WANDB_API_KEY}` names a variable") and \
        "`secrets: [WANDB_API_KEY]`" in problem


def test_every_key_argus_holds_is_held_and_the_schema_agrees_with_the_loader():
    assert all(held_variables.held(name) for name in KEY_VARIABLES)  # state.root_key's keys: the anchor
    for name in HELD + FREE:
        assert bool(re.match("^" + HELD_NAME, name)) == held_variables.held(name) == (name in HELD), name
    assert not held_variables.held(held_variables.suggested("PROD_RAY_TOKEN"))
