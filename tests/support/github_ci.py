"""The generated GitHub CI, run here: its steps' bash with the environment GitHub would give them, and
the two linters (actionlint, zizmor) over a repository's .github."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from ruamel.yaml import YAML

BIN = Path(sys.executable).parent
EXPRESSION = re.compile(r"\$\{\{\s*(.+?)\s*\}\}")


def load(path: Path) -> dict:
    return YAML(typ="safe").load(path.read_text())


def evaluate(text: str, context: dict[str, str]) -> str:
    """`${{ a.b }}` replaced by context["a.b"]; an expression the test did not give is an error, never ''."""
    def value(match: re.Match[str]) -> str:
        if match[1] not in context:
            raise KeyError(f"the test gives no value for ${{{{ {match[1]} }}}} in {text!r}")
        return context[match[1]]

    return EXPRESSION.sub(value, str(text))


def action_step(action: Path, step_id: str) -> dict:
    """One step of the composite action (action.yml) by its id."""
    [step] = [s for s in load(action / "action.yml")["runs"]["steps"] if s.get("id") == step_id]
    return step


def inputs(action: Path, given: dict[str, str]) -> dict[str, str]:
    """The action's inputs as GitHub gives them: the step's `with:` over the defaults."""
    declared = load(action / "action.yml")["inputs"]
    return {f"inputs.{name}": str(given.get(name, spec.get("default", ""))) for name, spec in declared.items()}


def run_step(step: dict, context: dict[str, str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    """A `run:` step as the runner runs it: its env evaluated, bash -e (GitHub's `shell: bash`)."""
    evaluated = {name: evaluate(value, context) for name, value in step.get("env", {}).items()}
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
                          cwd=cwd, env=env | evaluated, capture_output=True, text=True)


def outputs(path: Path) -> dict[str, str]:
    """A $GITHUB_OUTPUT file's name=value lines."""
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def actionlint(repository: Path) -> subprocess.CompletedProcess:
    """actionlint over every workflow of the repository (it reads .github/actionlint.yaml there)."""
    return subprocess.run([str(BIN / "actionlint"), "-no-color"], cwd=repository, capture_output=True, text=True)


def zizmor(github: Path, *options: str) -> subprocess.CompletedProcess:
    """zizmor over a .github directory, offline (no GitHub API), with its zizmor.yml unless told otherwise."""
    return subprocess.run([str(BIN / "zizmor"), "--offline", "--no-progress", *options, str(github)],
                          capture_output=True, text=True, env=os.environ | {"NO_COLOR": "1"})
