"""argus init DIR: a workspace that validates and plans, for the local cluster or a real one."""

from __future__ import annotations

import re
from pathlib import Path

import typer

from reconcile.boundary import EXIT_OK
from specs.errors import ArgusError

SCHEMA = ".argus/argus.schema.json"
"""Written into the workspace, so editors validate offline; `argus schema` prints it again."""


def run(directory: Path, address: str, shared_root: str) -> int:
    name = re.sub(r"[^a-z0-9-]", "-", directory.resolve().name.lower()).strip("-")[:63] or "workspace"
    files = scaffold(name, address, shared_root)
    clashes = sorted(rel for rel in files if (directory / rel).exists())
    if clashes:
        raise ArgusError(f"argus init never overwrites: {', '.join(clashes)} already exist in {directory}. "
                         "Pick an empty directory.")
    for rel, text in files.items():
        (directory / rel).parent.mkdir(parents=True, exist_ok=True)
        (directory / rel).write_text(text)
        if rel.endswith(".sh"):
            (directory / rel).chmod(0o755)
    typer.echo(f"Created workspace {name!r} in {directory}: {', '.join(sorted(files))}.")
    typer.echo(f"Next: `argus local up` (for the local cluster), then `argus plan {directory}`.")
    return EXIT_OK


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
        **github_files(),
    }


def github_files() -> dict[str, str]:
    """The pull-request workflow (plan, apply, drift) and the action it uses, as in docs/ci.md."""
    templates = Path(__file__).resolve().parent.parent / "templates" / "github"
    files = {f".github/actions/argus/{name}": (templates / name).read_text() for name in ("action.yml", "run.sh")}
    for name in ("argus-plan.yml", "argus-apply.yml", "argus-drift.yml"):
        text = (templates / name).read_text().replace("infra/argus/**", "**").replace("infra/argus", ".")
        files[f".github/workflows/{name}"] = text
    return files
