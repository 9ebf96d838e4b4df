"""argus init DIR: a workspace that validates and plans, for the local cluster or a real one, and its CI."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import typer

from reconcile.boundary import EXIT_OK
from specs.errors import ArgusError

SCHEMA = ".argus/argus.schema.json"
"""Written into the workspace, so editors validate offline; `argus schema` prints it again."""

TEMPLATES = Path(__file__).resolve().parent.parent / "templates" / "github"
"""The CI recipe, identical to the repository's .github/actions/argus and examples/github (a test says so)."""

ACTION = ("action.yml", "run.sh", "comment.js", "requirements.txt")
WORKFLOWS = ("argus-plan.yml", "argus-validate.yml", "argus-apply.yml", "argus-drift.yml")
TEMPLATE_WORKSPACE = "infra/argus"
"""The workspace directory the templates are written for; init puts the real one in its place."""


def run(directory: Path, address: str, shared_root: str) -> int:
    name = re.sub(r"[^a-z0-9-]", "-", directory.resolve().name.lower()).strip("-")[:63] or "workspace"
    root = repository_root(directory)
    workspace = directory.resolve().relative_to(root).as_posix()
    own, ci = scaffold(name, address, shared_root), github_files(workspace)
    write({directory / rel: text for rel, text in own.items()} | {root / rel: text for rel, text in ci.items()})
    typer.echo(f"Created workspace {name!r} in {directory}: {', '.join(sorted(own))}.")
    typer.echo(f"Created its CI in {_shown(root)}: {', '.join(sorted(ci))}. docs/ci.md says which settings "
               "they need (an environment `argus`, a runner labelled ray-head).")
    typer.echo(f"Next: `argus local up` (for the local cluster), then `argus plan {directory}`.")
    return EXIT_OK


def write(files: dict[Path, str]) -> None:
    """All or nothing: one existing file refuses the whole init, naming every clash."""
    clashes = sorted(_shown(path) for path in files if path.exists())
    if clashes:
        raise ArgusError(f"argus init never overwrites, and these files exist: {', '.join(clashes)}. "
                         "Move them aside, or pick another directory.")
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if path.suffix == ".sh":
            path.chmod(0o755)


def repository_root(directory: Path) -> Path:
    """The git repository holding DIR (its workflows live at the root's .github/); DIR itself outside git."""
    start = directory.resolve()
    return next((p for p in (start, *start.parents) if (p / ".git").exists()), start)


def github_files(workspace: str) -> dict[str, str]:
    """The workflows (plan, fork validation, apply, drift) and the action, for WORKSPACE (relative to the root)."""
    files = {f".github/actions/argus/{name}": (TEMPLATES / name).read_text() for name in ACTION}
    for name in WORKFLOWS:
        files[f".github/workflows/{name}"] = for_workspace((TEMPLATES / name).read_text(), workspace)
    return files


def for_workspace(template: str, workspace: str) -> str:
    """Paths filters and the action's `workspace:` input, as double-quoted YAML strings."""
    paths = "**" if workspace == "." else f"{workspace}/**"
    return (template.replace(f'"{TEMPLATE_WORKSPACE}/**"', json.dumps(paths))
            .replace(f'"{TEMPLATE_WORKSPACE}"', json.dumps(workspace)))


def modeline(rel: str) -> str:
    """yaml-language-server resolves $schema relative to the YAML file itself."""
    up = "../" * rel.count("/")
    return f"# yaml-language-server: $schema={up}{SCHEMA}\n"


def scaffold(name: str, address: str, shared_root: str) -> dict[str, str]:
    from specs.schema import schema_text

    return {
        SCHEMA: schema_text(),
        "argus.yaml": f"{modeline('argus.yaml')}kind: Workspace\nname: {name}\n",
        "clusters/local.yaml": (
            f"{modeline('clusters/local.yaml')}kind: Cluster\nname: local\naddress: {address}\n"
            f"shared_root: {shared_root}\n"
            "job_defaults:\n  entrypoint_num_cpus: 1\n  entrypoint_resources: {worker_node: 1}   "
            "# the driver runs on a worker, never on the head\n"),
        "jobs/hello.yaml": (
            f"{modeline('jobs/hello.yaml')}kind: Job\nname: hello\ncluster: local\nworkload: command\n"
            "entrypoint: [python3, -c, \"import socket; print('hello from', socket.gethostname())\"]\n"),
        ".gitignore": ".shared/\n",
    }


def _shown(path: Path) -> str:
    """A path as the person typed it: relative to the current directory when inside it."""
    relative = os.path.relpath(path)
    return path.as_posix() if relative.startswith("..") else relative
