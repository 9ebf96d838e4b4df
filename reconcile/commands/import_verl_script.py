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

from reconcile.commands.common import chosen_cluster, load
from specs.desired import DesiredState
from specs.errors import ArgusError
from specs.secrets.secret_scan import SECRET_KEY_PATTERN
from specs.secrets.secret_words import redact, secrets_in, worth_hiding
from state.verl.script_map import Imported, ImportRefused, import_script, secret_values
from state.verl.script_shell import evaluate

MAX_SCRIPT = 1024 * 1024
REFUSED_VARIABLES = frozenset({
    "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS0", "PS1", "PS2", "PS3", "PS4", "IFS", "PATH", "HOME", "PWD",
    "OLDPWD", "CDPATH", "GLOBIGNORE", "PROMPT_COMMAND", "POSIXLY_CORRECT", "TMOUT", "EXECIGNORE", "FUNCNEST",
    "INPUTRC", "SHELL", "SHLVL", "OPTIND", "OPTARG", "OPTERR", "UID", "EUID", "PPID", "LANG", "LANGUAGE", "TZ",
    "TZDIR", "TMPDIR", "GCONV_PATH", "LOCPATH", "NLSPATH", "HOSTALIASES", "RES_OPTIONS", "LOCALDOMAIN",
    "GLIBC_TUNABLES"})
REFUSED_PREFIXES = ("BASH", "LD_", "LC_", "MALLOC_", "HIST", "MAIL")
"""`--env` names bash or the loader act on before the shell's restrictions hold (BASH_ENV and ENV source a file,
PS4 and PROMPT_COMMAND expand commands, SHELLOPTS and BASHOPTS set options, IFS splits words, LD_PRELOAD loads
code into bash, BASH_FUNC_* defines functions) or that the sandbox sets itself (PATH, HOME)."""


def run(directory: Path, script: Path, args: list[str], name: str | None, cluster: str | None, code: str | None,
        output: Path | None, variables: list[str] | None = None) -> int:
    desired = load(directory)
    text = _read(script)
    job_name = name or _name(script)
    if job_name in desired.jobs:
        raise ArgusError(f"a Job named {job_name!r} exists already ({_where(desired, job_name)}): pass --name")
    on = chosen_cluster(desired, cluster)
    given = _variables(variables or [])
    found = evaluate(text, args, given)
    hidden = secret_values(found) + secrets_in([*args, *(f"{k}={v}" for k, v in given.items())]) + [
        value for key, value in given.items() if SECRET_KEY_PATTERN.search(key) and worth_hiding(value)]
    try:
        imported = import_script(found, str(script), job_name, on, _code(desired, on, code), frozenset(given))
    except ImportRefused as refused:  # its message may quote the script: never a secret of it
        raise ImportRefused(redact(str(refused), hidden)) from None
    target = output or directory / "jobs" / f"{job_name}.yaml"
    if target.exists():
        raise ArgusError(f"{target} exists: argus import never overwrites a file; pass --output or --name")
    target.parent.mkdir(parents=True, exist_ok=True)
    body = yaml.safe_dump(imported.spec, sort_keys=False, allow_unicode=True, width=1 << 20)
    target.write_text(redact(_header(script, text, imported, args, given) + body, hidden))  # the last defence
    _report(target, imported, hidden)
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
            raise ArgusError(f"--env {name[:64]!r}...: write NAME=VALUE, NAME of letters, digits and _")
        if name in REFUSED_VARIABLES or name.startswith(REFUSED_PREFIXES):
            raise ArgusError(f"--env {name}: refused: bash or the loader act on {name} before the script is read "
                             "(it can run code, or change the shell that reads it); set only the variables the "
                             "script itself reads")
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


def _report(target: Path, imported: Imported, hidden: list[str]) -> None:
    def echo(line: str) -> None:
        typer.echo(redact(line, hidden))

    echo(f"Wrote {target} (job {imported.spec['name']!r}, from the launch at line {imported.line}).")
    echo("Mapped:")
    for note in imported.mapped:
        echo(f"  {note}")
    echo("Left out (review these):" if imported.left_out else "Left out: nothing.")
    for note in imported.left_out:
        echo(f"  {note}")
    echo("Next: `argus plan` checks it like any job; commit it when it is right.")
