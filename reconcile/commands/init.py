"""argus init DIR: a workspace that validates and plans, for the local cluster or a real one, and its CI.

The CI serves every workspace of the repository (its first job lists the workspaces a change touches), so
a second workspace's init writes only the workspace and says the CI is there. Nothing is ever overwritten.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import typer

from reconcile.boundary import EXIT_OK
from reconcile.commands.install_source import InstallSource, detect, given
from reconcile.version import installed_version
from specs.errors import ArgusError

SCHEMA = ".argus/argus.schema.json"
"""Written into the workspace, so editors validate offline; `argus schema` prints it again."""

TEMPLATES = Path(__file__).resolve().parent.parent / "templates" / "github"
"""The CI recipe, identical to the repository's .github/actions/argus and examples/github (a test says so)."""

ACTION = ("action.yml", "run.sh", "comment.js")
WORKFLOWS = ("argus-plan.yml", "argus-validate.yml", "argus-apply.yml", "argus-drift.yml")
LINT = ("actionlint.yaml", "zizmor.yml")
"""Linters' settings in .github/: the self-hosted label, and the one zizmor finding kept on purpose."""
REQUIREMENTS = ".github/actions/argus/requirements.txt"
HF_HOME = "${shared_root}/hf"
"""Where a verl job's hub model is looked for (state/verl/files.py warns when it is not cached there)."""


def run(directory: Path, address: str, shared_root: str, ci: bool = True, install_from: str | None = None) -> int:
    name = re.sub(r"[^a-z0-9-]", "-", directory.resolve().name.lower()).strip("-")[:63] or "workspace"
    root = repository_root(directory)
    own = scaffold(name, address, shared_root)
    source = (given(install_from) if install_from else detect()) if ci else None
    ci_files = {root / rel: text for rel, text in github_files(source).items()} if source else {}
    present = any(path.exists() for path in ci_files if path.name not in LINT)
    write({directory / rel: text for rel, text in own.items()} | _to_write(ci_files, present))
    typer.echo(f"Created workspace {name!r} in {directory}: {', '.join(sorted(own))}.")
    if source is None:
        typer.echo("No CI written (--no-ci).")
    elif present:
        _say_ci_is_there(root, ci_files)
    else:
        typer.echo(f"Created its CI in {_shown(root)}: {', '.join(sorted(_rel(p, root) for p in ci_files))}. "
                   f"It installs {source.requirement}. docs/ci.md says which settings they need (an environment "
                   f"argus-<slug> per workspace, a runner labelled ray-head).")
    if source is not None and source.warning:
        typer.echo(f"Warning: {source.warning}", err=True)
    typer.echo(f"Next: `argus local up` (for the local cluster), then `argus plan {directory}`.")
    return EXIT_OK


def _to_write(ci_files: dict[Path, str], present: bool) -> dict[Path, str]:
    """All the CI where the repository has none of it; else only a linter's settings file it lacks."""
    return {path: text for path, text in ci_files.items() if not path.exists() and (not present or path.name in LINT)}


def _say_ci_is_there(root: Path, ci_files: dict[Path, str]) -> None:
    """The workflows serve every workspace: say so, and name what differs from this argus's, leaving it."""
    typer.echo(f"argus's CI is already in {_shown(root / '.github')}: its workflows serve every workspace, "
               f"so none of it was written. The new workspace needs an environment argus-<slug> (docs/ci.md).")
    differ = sorted(_rel(p, root) for p, text in ci_files.items() if p.exists() and _differs(p, text))
    missing = sorted(_rel(p, root) for p in ci_files if p.name not in LINT and not p.exists())
    if differ:
        typer.echo(f"These differ from what this argus writes, and were left as they are: {', '.join(differ)}.")
    if REQUIREMENTS in differ:
        typer.echo(f"{REQUIREMENTS} pins another argus than this one ({_pins(ci_files[root / REQUIREMENTS])[0]}): "
                   "upgrade it in a pull request of its own (docs/ci.md).")
    if missing:
        typer.echo(f"These are missing, and were not written: {', '.join(missing)}.")


def _differs(path: Path, ours: str) -> bool:
    """requirements.txt differs only by what it installs: its comment says who wrote it, and how."""
    theirs = _text(path)
    if theirs is None or path.name != "requirements.txt":
        return theirs != ours
    return _pins(theirs) != _pins(ours)


def _pins(requirements_text: str) -> list[str]:
    return [line.strip() for line in requirements_text.splitlines() if line.strip() and not line.startswith("#")]


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
    from state.code.gitinfo import repository_root as found

    return found(directory) or directory.resolve()


def github_files(source: InstallSource) -> dict[str, str]:
    """The workflows (plan, fork validation, apply, drift), the action with its argus pin, the linters' settings."""
    files = {f".github/actions/argus/{name}": (TEMPLATES / name).read_text() for name in ACTION}
    files[REQUIREMENTS] = requirements(source)
    files |= {f".github/workflows/{name}": (TEMPLATES / name).read_text() for name in WORKFLOWS}
    return files | {f".github/{name}": (TEMPLATES / name).read_text() for name in LINT}


def requirements(source: InstallSource) -> str:
    version = installed_version()  # "unknown" rather than a crash where argus runs uninstalled
    return ("# The one pin of argus for CI: the workflows install exactly this, from the base branch's copy of this\n"
            "# file (never from a pull request's). Upgrade argus by changing this line in a pull request of its own.\n"
            f"# Written by `argus init` of argus {version}, from {source.origin}.\n"
            f"{source.requirement}\n")


def modeline(rel: str) -> str:
    """yaml-language-server resolves $schema relative to the YAML file itself."""
    up = "../" * rel.count("/")
    return f"# yaml-language-server: $schema={up}{SCHEMA}\n"


def scaffold(name: str, address: str, shared_root: str) -> dict[str, str]:
    from specs.schema.schema import schema_text

    return {
        SCHEMA: schema_text(),
        "argus.yaml": f"{modeline('argus.yaml')}kind: Workspace\nname: {name}\n",
        "clusters/local.yaml": (
            f"{modeline('clusters/local.yaml')}kind: Cluster\nname: local\naddress: {address}\n"
            f"shared_root: {shared_root}\n"
            "job_defaults:\n  entrypoint_num_cpus: 1\n  entrypoint_resources: {worker_node: 1}   "
            "# the driver runs on a worker, never on the head\n"
            f"  env: {{HF_HOME: \"{HF_HOME}\"}}   # where runs find hub models: the cluster has no internet\n"),
        "jobs/hello.yaml": (
            f"{modeline('jobs/hello.yaml')}kind: Job\nname: hello\ncluster: local\nworkload: command\n"
            "entrypoint: [python3, -c, \"import socket; print('hello from', socket.gethostname())\"]\n"),
        ".gitignore": ".shared/\n",
    }


def _shown(path: Path) -> str:
    """A path as the person typed it: relative to the current directory when inside it."""
    relative = os.path.relpath(path)
    return path.as_posix() if relative.startswith("..") else relative


def _rel(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix()


def _text(path: Path) -> str | None:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return None
