"""Editor schema, pre-commit hook and `argus init`."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parents[2]


def test_the_committed_schema_is_current(argus):
    printed = argus("schema")
    assert printed.code == 0
    committed = (ROOT / "schema" / "argus.schema.json").read_text()
    assert printed.out == committed, "schema drifted: run `argus schema > schema/argus.schema.json`"
    kinds = {d["properties"]["kind"]["const"] for d in json.loads(committed)["$defs"].values()
             if "kind" in d.get("properties", {})}
    assert kinds == {"Workspace", "Cluster", "CodeSnapshot", "Job", "Quotas", "Dataset", "Model"}
    for kind in sorted(kinds):
        name = f"{kind.lower()}.schema.json"
        one = argus("schema", "--kind", kind)
        assert one.code == 0 and one.out == (ROOT / "schema" / name).read_text(), \
            f"schema drifted: run `argus schema --kind {kind} > schema/{name}`"
    assert sorted(p.name for p in (ROOT / "schema").iterdir()) == sorted(
        ["argus.schema.json", "incident-report.schema.json", *(f"{k.lower()}.schema.json" for k in kinds)])


def test_every_example_names_the_schema_for_editors():
    for path in sorted((ROOT / "examples").rglob("*.yaml")):
        if any(part.startswith(".") for part in path.relative_to(ROOT).parts):
            continue
        first = path.read_text().splitlines()[0]
        assert first.startswith("# yaml-language-server: $schema="), path
        assert (path.parent / first.split("=", 1)[1]).resolve() == ROOT / "schema" / "argus.schema.json", path


def test_the_pre_commit_hook_runs_validate():
    [hook] = YAML(typ="safe").load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "argus-validate" and hook["entry"] == "argus validate --files" and hook["pass_filenames"]
    # what it does at a monorepo's root, run as pre-commit runs it: tests/commands/test_precommit.py


def test_init_in_a_git_repository_writes_the_ci_at_the_repository_root(tmp_path, argus, ray_cluster):
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    target = repo / "infra" / "argus"
    created = argus("init", target, "--address", ray_cluster.address)
    assert created.code == 0, created.err
    assert argus("validate", target).code == 0
    plan = argus("plan", target, "--detailed-exitcode")
    assert plan.code == 2 and "+ job.hello" in plan.out and "workspace 'argus'" in plan.out
    first = (target / "jobs" / "hello.yaml").read_text().splitlines()[0]
    assert (target / "jobs" / first.split("=", 1)[1]).resolve() == target / ".argus" / "argus.schema.json"

    assert not (target / ".github").exists()
    workflows = sorted(p.name for p in (repo / ".github" / "workflows").iterdir())
    assert workflows == ["argus-apply.yml", "argus-drift.yml", "argus-plan.yml", "argus-validate.yml"]
    for name in workflows:  # one set of workflows for every workspace: the matrix comes from `argus workspaces`
        assert _workspaces(repo / ".github" / "workflows" / name) == {"${{ matrix.workspace.dir }}"}, name
    action = repo / ".github" / "actions" / "argus"
    assert sorted(p.name for p in action.iterdir()) == ["action.yml", "comment.js", "requirements.txt", "run.sh"]
    assert (action / "run.sh").stat().st_mode & 0o111
    assert sorted(p.name for p in (repo / ".github").iterdir()) == ["actionlint.yaml", "actions", "workflows",
                                                                   "zizmor.yml"]


def test_init_outside_git_makes_the_directory_the_root(tmp_path, argus):
    target = tmp_path / "My Team"
    assert argus("init", target).code == 0
    assert "name: my-team" in (target / "argus.yaml").read_text()
    assert (target / ".github" / "workflows" / "argus-plan.yml").is_file()


def test_a_second_workspace_gets_no_second_ci_and_nothing_is_overwritten(tmp_path, argus, monkeypatch):
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    monkeypatch.chdir(repo)
    assert argus("init", "teams/nlp").code == 0
    github = repo / ".github"
    before = {p: p.read_bytes() for p in github.rglob("*") if p.is_file()}
    plan = github / "workflows" / "argus-plan.yml"
    plan.write_text(plan.read_text() + "# ours\n")  # the repository's own edit
    before[plan] = plan.read_bytes()
    pin = github / "actions" / "argus" / "requirements.txt"  # a comment of its own; the same argus
    pin.write_text("# pinned by the platform team\n" + pin.read_text())
    before[pin] = pin.read_bytes()
    (github / "workflows" / "argus-drift.yml").unlink()  # and a workflow it chose not to have
    del before[github / "workflows" / "argus-drift.yml"]

    second = argus("init", "teams/vision")
    assert second.code == 0, second.err
    assert "argus's CI is already in .github" in second.out
    assert "differ from what this argus writes, and were left as they are: .github/workflows/argus-plan.yml." \
        in second.out
    assert "missing, and were not written: .github/workflows/argus-drift.yml." in second.out
    assert (repo / "teams" / "vision" / "argus.yaml").is_file()
    assert {p: p.read_bytes() for p in github.rglob("*") if p.is_file()} == before  # not one byte of CI changed

    again = argus("init", "teams/vision")  # the workspace's own files: all or nothing, never overwritten
    assert again.code == 1
    assert "never overwrites, and these files exist:" in again.err and "teams/vision/argus.yaml" in again.err

    alone = argus("init", "teams/audio", "--no-ci")
    assert alone.code == 0 and "No CI written (--no-ci)." in alone.out and "already" not in alone.out
    assert {p: p.read_bytes() for p in github.rglob("*") if p.is_file()} == before


def test_a_repository_with_its_own_linter_settings_keeps_them(tmp_path, argus, monkeypatch):
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    own = repo / ".github" / "actionlint.yaml"
    own.parent.mkdir()
    own.write_text("self-hosted-runner:\n  labels: [gpu]\n")
    monkeypatch.chdir(repo)
    created = argus("init", "infra/argus")
    assert created.code == 0, created.err
    assert own.read_text() == "self-hosted-runner:\n  labels: [gpu]\n"
    assert (repo / ".github" / "workflows" / "argus-plan.yml").is_file() and (repo / ".github" / "zizmor.yml").is_file()


def _workspaces(workflow: Path) -> set[str]:
    steps = [s for job in _yaml(workflow)["jobs"].values() for s in job["steps"]]
    return {s["with"]["workspace"] for s in steps if s.get("uses", "").endswith(".github/actions/argus")
            and "workspace" in s["with"]}


def _yaml(path: Path):
    return YAML(typ="safe").load(path.read_text())


def test_the_cli_reference_is_current_and_matches_help(argus):
    from reconcile.cli_reference import reference

    committed = (ROOT / "docs" / "cli.md").read_text()
    assert reference() == committed, "docs/cli.md is stale: python -m reconcile.cli_reference > docs/cli.md"
    for section in committed.split("\n#")[1:]:
        title = section.split("`")[1]
        options = [cell.strip("`") for line in section.splitlines() if line.startswith("| `--")
                   for cell in line.split(" | ")[0].lstrip("| ").split(", ")]
        if not options:
            continue
        shown = argus(*title.split()[1:], "--help").out
        assert all(option in shown for option in options), (title, options)


def test_the_packaged_github_templates_are_the_repositorys_own():
    from reconcile.commands.init import ACTION, LINT, TEMPLATES, WORKFLOWS, requirements
    from reconcile.commands.install_source import given

    assert sorted(p.name for p in TEMPLATES.iterdir()) == sorted(ACTION + WORKFLOWS + LINT)
    action = ROOT / ".github" / "actions" / "argus"
    for name in ACTION:
        assert (TEMPLATES / name).read_text() == (action / name).read_text(), name
    for name in WORKFLOWS:
        assert (TEMPLATES / name).read_text() == (ROOT / "examples" / "github" / name).read_text(), name
    assert sorted(p.name for p in (ROOT / "examples" / "github").iterdir()) == sorted(WORKFLOWS)
    assert (TEMPLATES / "actionlint.yaml").read_text() == (ROOT / ".github" / "actionlint.yaml").read_text()
    # requirements.txt is the one file init writes per repository: the repository's copy is the release pin's
    version = re.search(r'^version = "(.+)"$', (ROOT / "pyproject.toml").read_text(), re.M)[1]
    assert (action / "requirements.txt").read_text() == requirements(given(f"argus-ray=={version}"))
