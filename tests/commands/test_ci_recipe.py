"""The CI recipe's safety, read as data: what a pull request can make run, where, with which rights."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / "examples" / "github"
ACTION = ROOT / ".github" / "actions" / "argus"
FORK_GUARD = "github.event.pull_request.head.repo.full_name == github.repository"
PERMISSIONS = {  # per workflow: the most any of its jobs may have
    "argus-plan.yml": {"contents": "read", "pull-requests": "write"},
    "argus-validate.yml": {"contents": "read", "pull-requests": "write"},
    "argus-apply.yml": {"contents": "read", "actions": "read", "pull-requests": "read"},
    "argus-drift.yml": {"contents": "read"},
}


def load(name: str) -> dict:
    return YAML(typ="safe").load((WORKFLOWS / name).read_text())


def steps(workflow: dict) -> list[dict]:
    return [step for job in workflow["jobs"].values() for step in job["steps"]]


def test_the_plan_runs_the_base_branchs_workflow_action_and_argus_and_reads_the_pr_as_data():
    plan = load("argus-plan.yml")
    assert set(plan["on"]) == {"pull_request_target"}  # the base branch's copy of this file runs
    checkouts = [s for s in steps(plan) if s.get("uses", "").startswith("actions/checkout@")]
    assert {s["with"]["path"] for s in checkouts} == {"pr"}
    assert {s["with"]["ref"] for s in checkouts} == {"${{ github.event.pull_request.head.sha }}"}
    used = [s["uses"] for s in steps(plan) if "actions/argus" in s.get("uses", "")]
    assert set(used) == {"$/.github/actions/argus"}  # this file's commit, never a file checked out at run time
    assert [s["with"]["files"] for s in steps(plan) if s.get("uses") in used] == ["pr", "pr"]
    assert {s["run"] for s in steps(plan) if "run" in s} == {"rm -rf pr"}  # the only command touching pr/


def test_each_affected_workspace_is_planned_in_its_own_job_artifact_and_comment():
    plan = load("argus-plan.yml")
    [find] = [s for s in plan["jobs"]["workspaces"]["steps"] if s.get("id") == "find"]
    assert find["with"] == {"mode": "workspaces", "files": "pr",
                            "changed-from": "${{ github.event.pull_request.base.sha }}"}
    job = plan["jobs"]["plan"]
    assert job["needs"] == "workspaces"
    assert job["strategy"]["matrix"] == {"workspace": "${{ fromJSON(needs.workspaces.outputs.workspaces) }}"}
    assert job["strategy"]["fail-fast"] is False
    assert "${{ matrix.workspace.slug }}" in job["concurrency"]["group"]
    [upload] = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert upload["with"]["name"] == "argus-plan-${{ matrix.workspace.slug }}-${{ github.event.pull_request.head.sha }}"
    [argus] = [s for s in job["steps"] if s.get("uses") == "$/.github/actions/argus"]
    assert argus["with"]["workspace"] == "${{ matrix.workspace.dir }}"  # the comment's marker names it


def test_fork_pull_requests_never_reach_the_self_hosted_runner():
    for name in ("argus-plan.yml", "argus-validate.yml"):
        for job_name, job in load(name)["jobs"].items():
            if "self-hosted" in job["runs-on"]:
                assert job["if"].split(" && ")[0] == FORK_GUARD, (name, job_name)
            else:
                assert job["runs-on"] == "ubuntu-latest", job_name
                assert job["if"].split(" && ")[0] == FORK_GUARD.replace("==", "!="), job_name
    validate = load("argus-validate.yml")["jobs"]["validate"]
    assert [s["with"]["mode"] for s in validate["steps"] if "mode" in s.get("with", {})] == ["validate"]


def test_every_checkout_keeps_no_credentials_and_every_action_is_pinned_or_this_commits():
    for name in PERMISSIONS:
        for step in steps(load(name)):
            uses = step.get("uses", "")
            if uses.startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False, name
            if uses:
                assert uses == "$/.github/actions/argus" or re.fullmatch(r"[\w-]+/[\w-]+@[0-9a-f]{40}", uses), uses
    texts = [(WORKFLOWS / name).read_text() for name in PERMISSIONS] + [(ACTION / "action.yml").read_text()]
    pinned = [line for text in texts for line in text.splitlines() if re.search(r"uses: [\w-]+/", line)]
    assert pinned and all(re.search(r"@[0-9a-f]{40} # v\d+\.\d+\.\d+$", line) for line in pinned), pinned


def test_apply_runs_on_merge_per_workspace_in_its_environment_one_at_a_time():
    apply = load("argus-apply.yml")
    assert apply["on"] == {"push": {"branches": ["main"]}}
    job = apply["jobs"]["apply"]
    assert job["environment"] == "argus-${{ matrix.workspace.slug }}"
    assert job["concurrency"] == {"group": "argus-apply-${{ matrix.workspace.slug }}", "cancel-in-progress": False}
    [fetch] = [s for s in job["steps"] if "run" in s]
    assert fetch["env"]["SLUG"] == "${{ matrix.workspace.slug }}"
    assert 'artifact="argus-plan-$SLUG-$head"' in fetch["run"]
    for name in ("argus-plan.yml", "argus-validate.yml", "argus-drift.yml"):
        assert all("environment" not in job for job in load(name)["jobs"].values()), name
        assert "secrets." not in (WORKFLOWS / name).read_text(), name
    assert "${{ matrix.workspace.slug }}" in load("argus-drift.yml")["jobs"]["drift"]["concurrency"]["group"]


def test_permissions_are_minimal():
    for name, allowed in PERMISSIONS.items():
        workflow = load(name)
        assert workflow["permissions"] == {}, name
        for job in workflow["jobs"].values():
            assert job["permissions"].items() <= allowed.items(), (name, job["permissions"])


def test_argus_is_this_project_pinned_once_in_the_base_branchs_action():
    texts = [p.read_text() for p in [*WORKFLOWS.iterdir(), *ACTION.iterdir()]]
    assert not any(re.search(r"pip3? install\b[^\n]*\bargus\b(?![-\w])", text) for text in texts)
    assert not any("pip install" in text for text in texts if "requirements.txt" not in text)
    [pin] = [line for line in (ACTION / "requirements.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    version = re.search(r'^version = "(.+)"$', (ROOT / "pyproject.toml").read_text(), re.M)[1]
    assert pin == f"argus-ray=={version}" or re.fullmatch(r"argus-ray @ git\+https://\S+@[0-9a-f]{40}", pin)
    install = YAML(typ="safe").load((ACTION / "action.yml").read_text())["runs"]["steps"][0]
    assert '-r "$requirements"' in install["run"] and 'requirements="$GITHUB_ACTION_PATH/requirements.txt"' \
        in install["run"]


def test_the_comment_is_found_by_marker_and_author():
    inputs = YAML(typ="safe").load((ACTION / "action.yml").read_text())["inputs"]
    assert inputs["comment-author"]["default"] == "github-actions[bot]"
    bot, marker = "github-actions[bot]", "<!-- argus-plan: infra/argus -->"
    comments = [{"id": 1, "user": {"login": "alice"}, "body": f"{marker}\nquoted by a person"},
                {"id": 2, "user": {"login": bot}, "body": "<!-- argus-plan: other -->\nanother workspace"},
                {"id": 3, "user": {"login": bot}, "body": f"{marker}\nthe plan of the last push"}]
    updated = comment_js(comments, f"{marker}\nnew plan")
    assert updated["result"] == "updated" and updated["calls"] == [["updateComment", 3]]
    created = comment_js(comments[:2], f"{marker}\nnew plan")
    assert created["result"] == "created" and created["calls"] == [["createComment", 7]]


def test_a_read_only_token_leaves_a_notice_instead_of_failing():
    refused = comment_js([], "<!-- argus-plan: . -->\nplan", fail_with=403)
    assert refused["result"] == "notice" and refused["summary"] == "<!-- argus-plan: . -->\nplan"
    assert "403" in refused["notices"][0]
    broken = comment_js([], "<!-- argus-plan: . -->\nplan", fail_with=500)
    assert broken["error"] == 500  # anything else is a real failure


HARNESS = """
const [script, input] = [process.argv[1], JSON.parse(process.argv[2])];  // node -e SCRIPT -- A B
const calls = [], notices = [];
let summary = null;
const refuse = async () => { if (input.fail_with) throw Object.assign(new Error('no'), {status: input.fail_with}); };
const github = {
  paginate: async (method, args) => method(args),
  rest: {issues: {
    listComments: () => input.comments,
    updateComment: async ({comment_id}) => { await refuse(); calls.push(['updateComment', comment_id]); },
    createComment: async ({issue_number}) => { await refuse(); calls.push(['createComment', issue_number]); },
  }},
};
const core = {notice: m => notices.push(m), summary: {addRaw(b) { summary = b; return this; }, write: async () => {}}};
const context = {repo: {owner: 'o', repo: 'r'}, issue: {number: 7}};
require(script)({github, context, core, body: input.body, author: 'github-actions[bot]'})
  .then(result => console.log(JSON.stringify({result, calls, notices, summary})))
  .catch(e => console.log(JSON.stringify({error: e.status})));
"""


def comment_js(comments: list[dict], body: str, fail_with: int | None = None) -> dict:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    given = json.dumps({"comments": comments, "body": body, "fail_with": fail_with})
    done = subprocess.run([node, "-e", HARNESS, "--", str(ACTION / "comment.js"), given],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)
