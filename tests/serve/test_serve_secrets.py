"""`argus serve A B`: one process holds both teams' variables; team A's jobs must never read team B's.

Each team lists what its jobs may read in its own `secrets:` (reconcile.serve.secret_lists): serve refuses
to start when two lists name one variable (unless the operator says `--shared-secret`), and a merge that
makes A's list name B's variable refuses A's turns while B goes on. Ray and the jobs' own dumps of their
environment on the shared root are the witnesses: the thief's job is never submitted, its dump never written.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest

from reconcile.serve.loop import Loop, LoopSettings
from reconcile.serve.loops import run_all
from reconcile.serve.secret_lists import SecretLists
from reconcile.serve.turn import TurnOptions
from specs.errors import ArgusError
from specs.load.loader import load_workspace
from tests.support.cluster import jobs_of, until, wait_for
from tests.support.workspace import Workspace, make_workspace

B_SECRET = "b-secret-" + secrets.token_hex(12)


def dumps_env(path: Path) -> list[str]:
    return ["python3", "-c", f"import json, os; open({str(path)!r}, 'w').write(json.dumps(dict(os.environ)))"]


def teams(tmp_path: Path, address: str, prefix: str, a: tuple[str, ...], b: tuple[str, ...]) -> tuple[Workspace, ...]:
    """Teams A and B, each with a shared root argus has laid out (a loop holds its lease there)."""
    found = (make_workspace(tmp_path / "a", f"{prefix}-a", address, secrets=a),
             make_workspace(tmp_path / "b", f"{prefix}-b", address, secrets=b))
    for team in found:
        (team.shared / ".argus").mkdir(parents=True)
    return found


@pytest.fixture
def b_exports(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("B_TOKEN", B_SECRET)
    return B_SECRET


def test_serve_refuses_to_start_when_two_teams_list_one_variable(tmp_path, ray_cluster, argus, b_exports):
    a, b = teams(tmp_path, ray_cluster.address, "sec-start", ("B_TOKEN",), ("B_TOKEN",))
    a.job("steal", dumps_env(a.shared / "stolen.json"), extra="env: {T: '${env:B_TOKEN}'}\n")
    b.job("own", dumps_env(b.shared / "own.json"), extra="env: {T: '${env:B_TOKEN}'}\n")
    refused = argus("serve", a.root, b.root, "--once", "--sync", "auto", "--watch", "0")
    assert refused.code == 1, refused.out
    assert f"{b.root}/argus.yaml:3: secrets: B_TOKEN is also listed by workspace sec-start-a ({a.root}/argus.yaml:3)" \
        in refused.err, refused.err
    assert "--shared-secret B_TOKEN" in refused.err and B_SECRET not in refused.out + refused.err
    assert jobs_of(ray_cluster.address, a.name) == [] and jobs_of(ray_cluster.address, b.name) == []
    assert not (a.shared / "stolen.json").exists()


def test_the_operator_may_share_a_variable_and_both_teams_then_receive_it(tmp_path, ray_cluster, argus, b_exports):
    a, b = teams(tmp_path, ray_cluster.address, "sec-shared", ("B_TOKEN",), ("B_TOKEN",))
    for team in (a, b):
        team.job("uses", dumps_env(team.shared / "env.json"), extra="env: {T: '${env:B_TOKEN}'}\n")
    served = argus("serve", a.root, b.root, "--once", "--sync", "auto", "--watch", "0", "--shared-secret", "B_TOKEN")
    assert served.code == 0, served.err
    for team in (a, b):
        [job] = jobs_of(ray_cluster.address, team.name)
        wait_for(ray_cluster.address, job.submission_id, {"SUCCEEDED"})
        assert json.loads((team.shared / "env.json").read_text())["T"] == B_SECRET


def test_a_merge_that_lists_another_teams_variable_stops_that_team_only(tmp_path, ray_cluster, b_exports):
    a, b = teams(tmp_path, ray_cluster.address, "sec-merge", (), ("B_TOKEN",))
    lists = SecretLists.serving([load_workspace(a.root), load_workspace(b.root)])
    # then team A merges a list naming B's variable, and a job that reads it
    a.allow("B_TOKEN")
    a.job("steal", dumps_env(a.shared / "stolen.json"), extra="env: {T: '${env:B_TOKEN}'}\n")
    b.job("own", dumps_env(b.shared / "own.json"), extra="env: {T: '${env:B_TOKEN}'}\n")
    reports: dict[str, list] = {a.name: [], b.name: []}
    loops = [Loop(ws.root, str(ws.shared), ws.name,
                  LoopSettings(TurnOptions(sync="auto", interval=1.0), once=True, watch=0, admit=lists.admit,
                               publish=[reports[ws.name].append]))
             for ws in (a, b)]
    assert run_all(loops) == 1
    [refused], [done] = reports[a.name], reports[b.name]
    assert not refused.ok and f"{a.root}/argus.yaml:3: secrets: B_TOKEN is also listed by workspace sec-merge-b" \
        in refused.error, refused.error
    assert done.ok, done.error
    [own] = until(lambda: jobs_of(ray_cluster.address, b.name), "team B's job was submitted")
    wait_for(ray_cluster.address, own.submission_id, {"SUCCEEDED"})
    assert json.loads((b.shared / "own.json").read_text())["T"] == B_SECRET
    assert jobs_of(ray_cluster.address, a.name) == [] and not (a.shared / "stolen.json").exists()


def test_the_first_to_list_a_variable_keeps_it_until_its_own_list_drops_it(tmp_path):
    a, b = teams(tmp_path, "http://127.0.0.1:9", "sec-order", (), ("B_TOKEN", "B_OTHER"))
    lists = SecretLists.serving([load_workspace(a.root), load_workspace(b.root)])
    a.allow("B_TOKEN")
    with pytest.raises(ArgusError, match="B_TOKEN is also listed by workspace sec-order-b"):
        lists.admit(load_workspace(a.root))
    lists.admit(load_workspace(b.root))  # the incumbent goes on: A's refused list was not kept
    b.allow("B_OTHER")
    lists.admit(load_workspace(b.root))
    lists.admit(load_workspace(a.root))  # B no longer lists it: A may
    b.allow("B_TOKEN", "B_OTHER")
    with pytest.raises(ArgusError, match="B_TOKEN is also listed by workspace sec-order-a"):
        lists.admit(load_workspace(b.root))  # B wants it back: now A holds it


@pytest.mark.parametrize(("name", "said"), [("ARGUS_ROOT_KEY", "argus holds these for itself"),
                                            ("PROD_RAY_TOKEN", "argus holds these for itself"),
                                            ("not a name", "give the name of an environment variable")])
def test_the_operator_cannot_share_what_argus_holds(name, said):
    with pytest.raises(ArgusError, match=said):
        SecretLists.serving([], [name])
