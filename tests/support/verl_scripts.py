"""verl's example scripts as argus specs (tests/state/verl/verl_scripts/) and the verl versions they are
composed against: shared by the verl script tests and their fixtures (tests/state/verl/conftest.py)."""

from __future__ import annotations

from pathlib import Path

from tests.support.workspace import Workspace, make_workspace

SCRIPTS = Path(__file__).resolve().parents[1] / "state" / "verl" / "verl_scripts"
VERSIONS = ("0.8.0", "0.9.1")


def verl_workspace(root: Path, name: str, repo: Path, tag: str = "") -> Workspace:
    """A workspace with a CodeSnapshot `verl-<version>` of `repo` at tag `v<version><tag>` per supported version."""
    ws = make_workspace(root, name, "http://127.0.0.1:9")
    for version in VERSIONS:
        ws.write(f"code-{version}.yaml", f"kind: CodeSnapshot\nname: verl-{version.replace('.', '')}\n"
                                         f"cluster: local\ngit: {{url: {repo}, ref: v{version}{tag}}}\n")
    return ws
