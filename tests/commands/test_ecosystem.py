"""Editor schema, pre-commit hook and `argus init`."""

from __future__ import annotations

import json
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
    assert kinds == {"Workspace", "Cluster", "CodeSnapshot", "Job"}
    for kind in sorted(kinds):
        name = f"{kind.lower()}.schema.json"
        one = argus("schema", "--kind", kind)
        assert one.code == 0 and one.out == (ROOT / "schema" / name).read_text(), \
            f"schema drifted: run `argus schema --kind {kind} > schema/{name}`"
    assert sorted(p.name for p in (ROOT / "schema").iterdir()) == sorted(
        ["argus.schema.json", *(f"{k.lower()}.schema.json" for k in kinds)])


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
    for name in workflows:
        assert _workspaces(repo / ".github" / "workflows" / name) == {"infra/argus"}, name
    for name in ("argus-plan.yml", "argus-validate.yml", "argus-apply.yml"):
        assert _path_filters(repo / ".github" / "workflows" / name) == ["infra/argus/**"], name
    action = repo / ".github" / "actions" / "argus"
    assert sorted(p.name for p in action.iterdir()) == ["action.yml", "comment.js", "requirements.txt", "run.sh"]
    assert (action / "run.sh").stat().st_mode & 0o111


def test_init_outside_git_makes_the_directory_the_root(tmp_path, argus):
    target = tmp_path / "My Team"
    assert argus("init", target).code == 0
    assert "name: my-team" in (target / "argus.yaml").read_text()
    plan = target / ".github" / "workflows" / "argus-plan.yml"
    assert _workspaces(plan) == {"."} and _path_filters(plan) == ["**"]


def test_init_never_overwrites_and_names_every_clash(tmp_path, argus, monkeypatch):
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    ours = repo / ".github" / "workflows" / "argus-plan.yml"
    ours.parent.mkdir(parents=True)
    ours.write_text("mine\n")
    monkeypatch.chdir(repo)
    refused = argus("init", "infra/argus")
    assert refused.code == 1
    assert "never overwrites, and these files exist: .github/workflows/argus-plan.yml." in refused.err
    assert ours.read_text() == "mine\n" and not (repo / "infra").exists()  # all or nothing

    ours.unlink()
    assert argus("init", "infra/argus").code == 0
    again = argus("init", "infra/argus")
    assert again.code == 1
    for name in (".github/workflows/argus-apply.yml", ".github/actions/argus/run.sh", "infra/argus/argus.yaml"):
        assert name in again.err


def _workspaces(workflow: Path) -> set[str]:
    steps = [s for job in _yaml(workflow)["jobs"].values() for s in job["steps"]]
    return {s["with"]["workspace"] for s in steps if s.get("uses", "").endswith(".github/actions/argus")}


def _path_filters(workflow: Path) -> list[str]:
    [trigger] = _yaml(workflow)["on"].values()
    return trigger["paths"]


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
    from reconcile.commands.init import ACTION, TEMPLATES, WORKFLOWS

    assert sorted(p.name for p in TEMPLATES.iterdir()) == sorted(ACTION + WORKFLOWS)
    for name in ACTION:
        assert (TEMPLATES / name).read_text() == (ROOT / ".github" / "actions" / "argus" / name).read_text(), name
    for name in WORKFLOWS:
        assert (TEMPLATES / name).read_text() == (ROOT / "examples" / "github" / name).read_text(), name
    assert sorted(p.name for p in (ROOT / "examples" / "github").iterdir()) == sorted(WORKFLOWS)
