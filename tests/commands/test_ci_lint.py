"""actionlint and zizmor over the CI `argus init` writes and over this repository's own .github: no finding,
except zizmor's one on argus-plan.yml's pull_request_target, kept on purpose (docs/ci.md) and exempted by
the zizmor.yml init writes, for that line alone."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.support.github_ci import actionlint, zizmor

ROOT = Path(__file__).resolve().parents[2]


def initialised(tmp_path: Path, argus) -> Path:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    assert argus("init", repo / "teams" / "nlp", "--install-from", "argus-ray==0.1.0").code == 0
    return repo


def findings(github: Path, *options: str) -> list[tuple[str, str]]:
    done = zizmor(github, "--format", "json", *options)
    assert done.stdout.startswith("["), done.stderr
    return [(f["ident"], Path(f["locations"][0]["symbolic"]["key"]["Local"]["verbatim_path"]).name)
            for f in json.loads(done.stdout)]


def test_the_generated_ci_has_no_actionlint_finding_and_needs_its_runner_label(tmp_path, argus):
    repo = initialised(tmp_path, argus)
    clean = actionlint(repo)
    assert clean.returncode == 0 and clean.stdout == "", clean.stdout + clean.stderr
    (repo / ".github" / "actionlint.yaml").unlink()  # the check can fail: without it, ray-head is unknown
    flagged = actionlint(repo)
    assert flagged.returncode == 1 and 'label "ray-head" is unknown' in flagged.stdout, flagged.stdout


def test_the_generated_ci_has_no_zizmor_finding_but_the_documented_trigger(tmp_path, argus):
    repo = initialised(tmp_path, argus)
    assert findings(repo / ".github") == []
    assert findings(repo / ".github", "--no-config") == [("dangerous-triggers", "argus-plan.yml")]
    plan = repo / ".github" / "workflows" / "argus-plan.yml"  # a second dangerous trigger is not exempt
    second = "  workflow_run: {workflows: [ci]}\npermissions: {}\n"
    plan.write_text(plan.read_text().replace("permissions: {}\n", second, 1))
    assert ("dangerous-triggers", "argus-plan.yml") in findings(repo / ".github")


def test_this_repositorys_own_github_directory_is_clean():
    linted = actionlint(ROOT)
    assert linted.returncode == 0 and linted.stdout == "", linted.stdout + linted.stderr
    assert findings(ROOT / ".github") == []
