"""argus import verl-script: a verl launch script as a Job spec a person reviews and commits.

The script's commands are never run: state.verl.script_shell reads it with bash in a shell that can run
nothing, and state.verl.script_map maps the launch it finds. The spec is written to a new file (never over
one), and what was mapped and what was left out is printed, so the reviewer knows what to look at.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import typer
import yaml

from reconcile.commands.common import load
from specs.desired import DesiredState
from specs.errors import ArgusError
from state.verl.script_map import Imported, import_script
from state.verl.script_shell import evaluate

MAX_SCRIPT = 1024 * 1024


def run(directory: Path, script: Path, args: list[str], name: str | None, cluster: str | None, code: str | None,
        output: Path | None, variables: list[str] | None = None) -> int:
    desired = load(directory)
    text = _read(script)
    job_name = name or _name(script)
    if job_name in desired.jobs:
        raise ArgusError(f"a Job named {job_name!r} exists already ({_where(desired, job_name)}): pass --name")
    on = _cluster(desired, cluster)
    given = _variables(variables or [])
    imported = import_script(evaluate(text, args, given), str(script), job_name, on, _code(desired, on, code),
                             frozenset(given))
    target = output or directory / "jobs" / f"{job_name}.yaml"
    if target.exists():
        raise ArgusError(f"{target} exists: argus import never overwrites a file; pass --output or --name")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(_header(script, text, imported, args, given) + yaml.safe_dump(imported.spec, sort_keys=False,
                                                                             allow_unicode=True, width=1 << 20))
    _report(target, imported)
    return 0


def _where(desired: DesiredState, job: str) -> str:
    from specs.address import Address

    source = desired.source(Address.job(job))
    return f"{source.file}:{source.line}"


def _variables(pairs: list[str]) -> dict[str, str]:
    """`--env NAME=VALUE`: what the script finds in its environment (for the script, not the job)."""
    given = {}
    for pair in pairs:
        name, eq, value = pair.partition("=")
        if not eq or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ArgusError(f"--env {pair!r}: write NAME=VALUE")
        given[name] = value
    return given


def _read(script: Path) -> str:
    if not script.is_file():
        raise ArgusError(f"{script}: no such file: name the verl launch script to import")
    data = script.read_bytes()[:MAX_SCRIPT + 1]
    if len(data) > MAX_SCRIPT or b"\0" in data:
        raise ArgusError(f"{script}: not a shell script (over {MAX_SCRIPT} bytes, or binary)")
    return data.decode(errors="replace")


def _name(script: Path) -> str:
    name = re.sub(r"[^a-z0-9-]+", "-", script.stem.lower()).strip("-")[:63].strip("-")
    return name or "imported"


def _cluster(desired: DesiredState, cluster: str | None) -> str:
    if cluster is not None and cluster not in desired.clusters:
        raise ArgusError(f"no Cluster named {cluster!r} in the workspace (it has {', '.join(desired.clusters)})")
    if cluster is None and len(desired.clusters) != 1:
        raise ArgusError(f"the workspace has {len(desired.clusters)} clusters: pass --cluster NAME")
    return cluster or next(iter(desired.clusters))


def _code(desired: DesiredState, cluster: str, code: str | None) -> str | None:
    on = [s.name for s in desired.snapshots.values() if s.cluster == cluster]
    if code is not None and code not in on:
        raise ArgusError(f"no CodeSnapshot named {code!r} on cluster {cluster!r} "
                         f"(there are: {', '.join(on) or 'none'})")
    if code is None and len(on) > 1:
        raise ArgusError(f"cluster {cluster!r} has {len(on)} code snapshots ({', '.join(on)}): pass --code NAME")
    return code or (on[0] if on else None)


def _header(script: Path, text: str, imported: Imported, args: list[str], given: dict[str, str]) -> str:
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    lines = [f"# imported by `argus import verl-script` from {script.name} (sha256 {digest}), line {imported.line}"
             + (f", with arguments {' '.join(args)}" if args else "")
             + (f", with {', '.join(given)} set" if given else ""),
             "# review it (docs/import.md), then `argus plan`; left out of the script:"]
    lines += [f"#   - {note}" for note in imported.left_out] or ["#   (nothing)"]
    return "\n".join(re.sub(r"[\r\n]", " ", line) for line in lines) + "\n"


def _report(target: Path, imported: Imported) -> None:
    typer.echo(f"Wrote {target} (job {imported.spec['name']!r}, from the launch at line {imported.line}).")
    typer.echo("Mapped:")
    for note in imported.mapped:
        typer.echo(f"  {note}")
    typer.echo("Left out (review these):" if imported.left_out else "Left out: nothing.")
    for note in imported.left_out:
        typer.echo(f"  {note}")
    typer.echo("Next: `argus plan` checks it like any job; commit it when it is right.")
