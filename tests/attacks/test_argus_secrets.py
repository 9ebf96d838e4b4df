"""A job spec is written by a pull request: it must not make argus hand a job argus's own secrets.

argus holds ARGUS_ROOT_KEY (it signs what argus trusts on the shared root), ARGUS_PLAN_KEY and
ARGUS_AUDIT_KEY in its environment, the same environment `${env:NAME}` reads a job's secrets from. Each
attack asserts the harm never happens on the real Ray cluster: the job is never submitted, and no job's
environment (dumped by the job itself to the shared root) ever holds a key's value.
"""

from __future__ import annotations

import json
import secrets

import pytest

from state.root_key import KEY_VARIABLES
from tests.support.cluster import jobs_of, wait_for

KEYS = {name: f"{name.lower()}-{secrets.token_hex(16)}" for name in KEY_VARIABLES}
JOB_SECRET = "job-secret-" + secrets.token_hex(8)


def dumps_env(path) -> list[str]:
    """A job that writes its whole environment to `path` on the shared root: what a hostile job would send away."""
    return ["python3", "-c", f"import json, os; open({str(path)!r}, 'w').write(json.dumps(dict(os.environ)))"]


@pytest.fixture
def keyed(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("WANDB_API_KEY", JOB_SECRET)
    return KEYS


@pytest.mark.parametrize("where", ["job", "job_defaults", "allow-list"])
def test_a_spec_naming_the_root_key_is_refused_at_its_line_and_never_submitted(workspace, argus, keyed, where):
    dump = workspace.shared / "stolen.json"
    if where == "job":
        workspace.job("steal", dumps_env(dump), extra="env: {K: '${env:ARGUS_ROOT_KEY}'}\n")
        blamed = "jobs/steal.yaml:6: env.K"
    elif where == "job_defaults":
        workspace.write("cluster.yaml", workspace.root.joinpath("cluster.yaml").read_text()
                        + "  env: {K: '${env:ARGUS_ROOT_KEY}'}\n")
        workspace.job("steal", dumps_env(dump))
        blamed = "cluster.yaml:8: job_defaults.env.K"
    else:  # the reviewed list itself may not name it
        workspace.allow("WANDB_API_KEY", "ARGUS_ROOT_KEY")
        workspace.job("steal", dumps_env(dump), extra="env: {K: '${env:ARGUS_ROOT_KEY}'}\n")
        blamed = "argus.yaml:3: secrets.1"
    for command in (("validate",), ("plan",), ("apply", "--auto-approve")):
        result = argus(*command, workspace.root)
        assert result.code == 1, (command, result.out, result.err)
        assert blamed in result.err and "argus holds these for itself" in result.err, result.err
        for value in keyed.values():
            assert value not in result.out + result.err
    assert jobs_of(workspace.address, workspace.name) == []
    assert not dump.exists() and not list(workspace.shared.glob("jobs/*/.secrets.env"))


def test_a_variable_not_on_the_allow_list_is_refused_and_says_how_to_allow_it(workspace, argus, keyed):
    workspace.job("wandb", dumps_env(workspace.shared / "env.json"), extra="env: {W: '${env:WANDB_API_KEY}'}\n")
    result = argus("apply", workspace.root, "--auto-approve")
    assert result.code == 1 and "jobs/wandb.yaml:6: env.W" in result.err, result.err
    assert "secrets: [WANDB_API_KEY]" in result.err and JOB_SECRET not in result.out + result.err
    assert jobs_of(workspace.address, workspace.name) == []


def test_an_allowed_secret_reaches_its_job_and_no_key_does(workspace, argus, keyed):
    """The positive control: the same path hands over what the Workspace allows, and only that."""
    dump = workspace.shared / "env.json"
    workspace.allow("WANDB_API_KEY")
    workspace.job("honest", dumps_env(dump), extra="env: {W: '${env:WANDB_API_KEY}'}\n")
    applied = argus("apply", workspace.root, "--auto-approve")
    assert applied.code == 0, applied.err
    [job] = jobs_of(workspace.address, workspace.name)
    wait_for(workspace.address, job.submission_id, {"SUCCEEDED"})
    received = json.loads(dump.read_text())
    assert received["W"] == JOB_SECRET
    for value in keyed.values():
        assert value not in dump.read_text()
    assert not set(KEY_VARIABLES) & set(received)


def test_a_value_that_is_a_keys_value_never_reaches_the_secrets_file(workspace, argus, keyed, monkeypatch):
    """Defence in depth: an allowed variable that holds the root key's value (an export gone wrong, or a
    way around the names) is refused where the run's secrets file is written; the run is not submitted."""
    monkeypatch.setenv("WANDB_API_KEY", keyed["ARGUS_ROOT_KEY"])
    dump = workspace.shared / "env.json"
    workspace.allow("WANDB_API_KEY")
    workspace.job("aliased", dumps_env(dump), extra="env: {W: '${env:WANDB_API_KEY}'}\n")
    applied = argus("apply", workspace.root, "--auto-approve")
    assert applied.code == 1, applied.out
    assert "W would receive the value of ARGUS_ROOT_KEY" in applied.err and "not submitted" in applied.err
    assert jobs_of(workspace.address, workspace.name) == []
    assert not dump.exists() and not list(workspace.shared.glob("jobs/*/.secrets.env"))
    for value in keyed.values():
        assert value not in applied.out + applied.err
        assert not [p for p in workspace.shared.rglob("*") if p.is_file() and value in p.read_text(errors="replace")]
