"""Editor schema, pre-commit hook and `argus init`."""

from __future__ import annotations

import json
from pathlib import Path

from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parents[1]


def test_the_committed_schema_is_current(argus):
    printed = argus("schema")
    assert printed.code == 0
    committed = (ROOT / "schema" / "argus.schema.json").read_text()
    assert printed.out == committed, "schema drifted: run `argus schema > schema/argus.schema.json`"
    kinds = {d["properties"]["kind"]["const"] for d in json.loads(committed)["$defs"].values()
             if "kind" in d.get("properties", {})}
    assert kinds == {"Workspace", "Cluster", "CodeSnapshot", "Job"}


def test_every_example_names_the_schema_for_editors():
    for path in sorted((ROOT / "examples").rglob("*.yaml")):
        if any(part.startswith(".") for part in path.relative_to(ROOT).parts):
            continue
        first = path.read_text().splitlines()[0]
        assert first.startswith("# yaml-language-server: $schema="), path
        assert (path.parent / first.split("=", 1)[1]).resolve() == ROOT / "schema" / "argus.schema.json", path


def test_the_pre_commit_hook_runs_validate():
    [hook] = YAML(typ="safe").load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "argus-validate" and hook["entry"] == "argus validate" and hook["pass_filenames"] is False


def test_init_scaffolds_a_workspace_that_validates_and_plans(tmp_path, argus, ray_cluster):
    target = tmp_path / "My Team"
    created = argus("init", target, "--address", ray_cluster.address)
    assert created.code == 0, created.err
    assert argus("validate", target).code == 0
    plan = argus("plan", target, "--detailed-exitcode")
    assert plan.code == 2 and "+ job.hello" in plan.out and "workspace 'my-team'" in plan.out
    first = (target / "jobs" / "hello.yaml").read_text().splitlines()[0]
    assert (target / "jobs" / first.split("=", 1)[1]).resolve() == target / ".argus" / "argus.schema.json"
    assert (target / ".github" / "workflows" / "argus-plan.yml").exists()
    assert (target / ".github" / "actions" / "argus" / "run.sh").stat().st_mode & 0o111
    again = argus("init", target)
    assert again.code == 1 and "never overwrites" in again.err


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
    templates = ROOT / "reconcile" / "templates" / "github"
    for name in ("action.yml", "run.sh"):
        assert (templates / name).read_text() == (ROOT / ".github" / "actions" / "argus" / name).read_text()
    for name in ("argus-plan.yml", "argus-apply.yml", "argus-drift.yml"):
        assert (templates / name).read_text() == (ROOT / "examples" / "github" / name).read_text()
