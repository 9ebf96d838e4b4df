"""The argus command line: thin commands that parse options and hand off to reconcile.commands.

Each command returns its exit code; main() runs the dispatch inside the one error boundary
(reconcile.boundary). Nothing here imports ray: `argus --help` and `argus validate` must start fast.

The top of the house. May import: specs, reconcile.*.
"""

from __future__ import annotations

import gc
import sys
from enum import Enum
from pathlib import Path

import typer

from reconcile.boundary import EXIT_OK, Invocation, guarded, is_tty, wants_json

app = typer.Typer(help="Declarative, GitOps-style reconciler for Ray training clusters. Exit codes: 0 done, "
                  "1 error, 2 changes (plan --detailed-exitcode), 3 a bug in argus, 130 interrupted. With --json "
                  '(or --format json) an error is also a JSON object on stdout: {"error", "kind", "where"}.',
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
local_app = typer.Typer(help="The embedded dev cluster: a Ray head plus a worker_node node on loopback.",
                        no_args_is_help=True)
app.add_typer(local_app, name="local")
audit_app = typer.Typer(help="The workspace's tamper-evident audit log.", no_args_is_help=True)
app.add_typer(audit_app, name="audit")
import_app = typer.Typer(help="Bring work made outside argus into the workspace as specs to review and commit "
                         "(docs/import.md).", no_args_is_help=True)
app.add_typer(import_app, name="import")

DIR = typer.Argument(Path("."), help="The workspace directory (holding argus.yaml).")
DIRS = typer.Argument(None, help="Workspace directories (holding argus.yaml; default: the current one). A directory "
                     "holding none stands for every workspace under it, each shown under its directory "
                     "(docs/workspaces.md).", show_default=False)
CHANGED_FROM = typer.Option(None, "--changed-from", metavar="GITREF", help="Only the workspaces under the DIRs that "
                            "`git diff GITREF...HEAD` touches (docs/workspaces.md).")
TIMEOUT = typer.Option(10.0, "--timeout", help="Seconds to wait for each request to a Ray dashboard; also what one "
                       "command spends in all on failed requests and retries against one dashboard "
                       "(docs/reliability.md).")
FETCH_TIMEOUT = typer.Option(300.0, "--fetch-timeout", min=1.0,
                             help="Seconds each git fetch of a code snapshot's source may take (a first clone of a "
                                  "large repository needs minutes); a fetch over it is stopped and reported.")
APPLY_TARGET = typer.Argument(Path("."), help="The workspace directory, or a plan file saved by `argus plan -o` "
                                             "(then the workspace is the one the plan names, or --dir).")
WORKSPACE_DIR = typer.Option(None, "--dir", help="The workspace, when applying a plan file (default: the directory "
                             "the plan records, in the git repository of the current directory or of the plan file).")
GC_THRESHOLD = 50_000
"""Allocations between two young-generation collections (Python's default: 700). A plan of thousands
of jobs makes millions of small objects (YAML nodes, models) that live until it ends: at the default,
collections kept walking them, ~0.5 s of CPU in a plan of 5,000 jobs (a fifth of its own time).
Cycles are still collected, only less often. The objects the imports made are frozen (gc.freeze) as well:
an older generation's collection then walks only what the command made (~0.15 s less in that plan)."""
LOCAL_DIR = typer.Option(Path("~/.argus/local"), "--state-dir", envvar="ARGUS_LOCAL_DIR",
                         help="Where the local cluster records its processes.")


def _print_version(asked: bool) -> None:
    if asked:
        from reconcile.version import build

        typer.echo(build().line())
        raise typer.Exit(EXIT_OK)


@app.callback()
def _root(ctx: typer.Context, debug: bool = typer.Option(False, "--debug", help="Show tracebacks of errors."),
          _version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version,
                                        help="Print argus's version (and the git commit it was installed from, "
                                             "when known), then exit.")) -> None:
    ctx.ensure_object(Invocation).debug = debug


@app.command()
def validate(directories: list[Path] = DIRS, changed_from: str | None = CHANGED_FROM,
             files: bool = typer.Option(False, "--files", help="The arguments are files (as pre-commit passes "
                                        "them): validate each workspace holding one; a file in none is skipped."),
             deep: bool = typer.Option(False, "--deep", help="Also compose every verl job's Hydra config "
                                       "against its code snapshot's source (fetches the sources)."),
             fetch_timeout: float = FETCH_TIMEOUT,
             as_json: bool = typer.Option(False, "--json", help='Machine-readable: {"valid": true, "workspace", '
                                          '"counts"}; invalid specs give the error object, whose "diagnostics" '
                                          "list each problem's file, line, field and message.")) -> int:
    """Check the desired state: YAML, schema, names, references. Offline."""
    from reconcile.commands import validate as command

    return command.run_all(directories or [Path(".")], changed_from, deep, fetch_timeout, as_json, files)


class Format(str, Enum):
    human = "human"
    json = "json"
    markdown = "markdown"


JSON = typer.Option(False, "--json", help="Machine-readable output (same as --format json).")
FORMAT = typer.Option(Format.human, "--format", help="human, json (docs/plan-format.md) or markdown (PR comments).")
OUT = typer.Option(None, "-o", "--out", help="Save the plan for `argus apply FILE`.")
PRUNE = typer.Option(False, "--prune", help="Delete this workspace's code snapshots that no spec names.")
TARGET = typer.Option([], "--target", help="Limit to this address (job.NAME, code.NAME) and what it needs. Repeatable.")
REPLACE = typer.Option([], "--replace", help="Run this job (job.NAME) again although unchanged. Repeatable.")
ALLOW_EMPTY = typer.Option(False, "--allow-empty", help="Allow a desired state with no jobs to stop every job.")
ALL_WORKSPACES = typer.Option(False, "--all-workspaces", help="List every job on the clusters that is not this "
                              "workspace's, one a line (default: one line per other workspace; jobs argus did not "
                              "submit listed while active, counted once finished). JSON always lists them all.")


def _plan_options(prune: bool, targets: list[str], replace: list[str], allow_empty: bool):
    from reconcile.model import PlanOptions

    return PlanOptions(prune=prune, targets=tuple(targets), replace=tuple(replace), allow_empty=allow_empty)


@app.command()
def plan(directories: list[Path] = DIRS, changed_from: str | None = CHANGED_FROM, timeout: float = TIMEOUT,
         detailed_exitcode: bool = typer.Option(False, "--detailed-exitcode",
                                                help="Exit 2 when there are changes or drifted runs, 0 when "
                                                     "none (1 on errors, such as a cluster not read)."),
         prune: bool = PRUNE, target: list[str] = TARGET, replace: list[str] = REPLACE,
         allow_empty: bool = ALLOW_EMPTY, output_format: Format = FORMAT, as_json: bool = JSON,
         out: Path | None = OUT,
         verify_snapshots: bool = typer.Option(False, "--verify-snapshots",
                                               help="Re-hash every snapshot's and every input version's files "
                                                    "against their digests."),
         fetch_timeout: float = FETCH_TIMEOUT, all_workspaces: bool = ALL_WORKSPACES) -> int:
    """Show what apply would do. Read-only (it may fill argus's private cache, never the shared root)."""
    from reconcile.commands import plan as command

    spec = command.PlanCommand(detailed_exitcode=detailed_exitcode, timeout=timeout, colour=is_tty(),
                               output_format="json" if as_json else output_format.value, out=out,
                               verify_snapshots=verify_snapshots, fetch_timeout=fetch_timeout,
                               all_workspaces=all_workspaces,
                               options=_plan_options(prune, target, replace, allow_empty))
    return command.run_all(directories or [Path(".")], changed_from, spec)


@app.command()
def apply(directory: Path = APPLY_TARGET, workspace_dir: Path | None = WORKSPACE_DIR,
          timeout: float = TIMEOUT,
          auto_approve: bool = typer.Option(False, "--auto-approve", help="Do not ask for confirmation."),
          stop_timeout: float = typer.Option(120.0, "--stop-timeout",
                                             help="Seconds to wait for a stopped job to reach a final status."),
          prune: bool = PRUNE, target: list[str] = TARGET, replace: list[str] = REPLACE,
          allow_empty: bool = ALLOW_EMPTY,
          keep_finished: int = typer.Option(3, "--keep-finished", min=1,
                                            help="Finished runs per job left in Ray's job table once logged."),
          lock_timeout: float = typer.Option(0.0, "--lock-timeout",
                                             help="Seconds to wait for another apply's lock (default: fail at once)."),
          fetch_timeout: float = FETCH_TIMEOUT) -> int:
    """Plan, confirm, then submit and stop jobs until the clusters match the desired state."""
    from reconcile.commands import apply as command

    options = command.ApplyOptions(auto_approve=auto_approve, timeout=timeout, stop_timeout=stop_timeout,
                                   colour=is_tty(), lock_timeout=lock_timeout, keep_finished=keep_finished,
                                   fetch_timeout=fetch_timeout, plan=_plan_options(prune, target, replace, allow_empty))
    if directory.is_file():
        return command.run_saved(directory, workspace_dir, options)
    return command.run(directory, options)


PLAN_FILE = typer.Argument(..., help="A plan file saved by `argus plan -o`.")


@app.command()
def show(plan_file: Path = PLAN_FILE, output_format: Format = FORMAT, as_json: bool = JSON) -> int:
    """Show a saved plan as it was reviewed. Checks the file as apply does; needs no cluster, changes nothing."""
    from reconcile.commands import plan_file as command

    return command.show(plan_file, "json" if as_json else output_format.value, is_tty())


class Kind(str, Enum):
    Workspace = "Workspace"
    Cluster = "Cluster"
    CodeSnapshot = "CodeSnapshot"
    Quotas = "Quotas"
    Job = "Job"
    Dataset = "Dataset"
    Model = "Model"


SCHEMA_KIND = typer.Option(None, "--kind", help="Only this kind's schema (schema/job.schema.json for Job); "
                           "default: any kind, told by its `kind` field.")
SCHEMA_SPLIT = typer.Option([], "--split", metavar="FILE", help="Write each YAML document of this spec file to "
                            "--out as <file>.line<N>.json, for schema tools that read one document per file "
                            "(check-jsonschema). Repeatable.")
SCHEMA_OUT = typer.Option(None, "--out", metavar="DIR", help="Where --split writes.")


@app.command()
def schema(kind: Kind | None = SCHEMA_KIND, split: list[Path] = SCHEMA_SPLIT, out: Path | None = SCHEMA_OUT) -> int:
    """Print the JSON Schema of every kind (also committed as schema/argus.schema.json), or split spec files."""
    from reconcile.commands import schema as command

    return command.run(kind.value if kind else None, split, out)


@app.command()
def init(directory: Path = DIR,
         address: str = typer.Option("http://127.0.0.1:8265", "--address", help="The cluster's Ray dashboard."),
         shared_root: str = typer.Option(".shared", "--shared-root", help="The NFS mount every node sees."),
         ci: bool = typer.Option(True, "--ci/--no-ci", help="Write the CI too, unless the repository has it."),
         install_from: str | None = typer.Option(
             None, "--install-from", help="What CI installs: argus-ray==X, git+URL@COMMIT or a wheel's path "
                                          "(default: where this argus is installed from).")) -> int:
    """Scaffold a workspace (argus.yaml, a cluster, a job, .gitignore) and, unless the repository has it, the CI
    for all its workspaces at the git repository's root. Never overwrites."""
    from reconcile.commands import init as command

    return command.run(directory, address, shared_root, ci, install_from)


ROOT = typer.Argument(Path("."), help="Where to look: every directory under it holding argus.yaml is a workspace "
                     "(docs/workspaces.md).")


@app.command()
def workspaces(root: Path = ROOT,
               changed_from: str | None = typer.Option(None, "--changed-from", metavar="GITREF",
                                                       help="Only the workspaces that `git diff GITREF...HEAD` "
                                                            "touches (a deleted argus.yaml's too)."),
               as_json: bool = typer.Option(False, "--json", help='A list of {"dir", "name", "slug"}; dir relative '
                                            'to the git repository\'s root (CI\'s matrix).')) -> int:
    """List the workspaces under ROOT, or those a change touched. Offline."""
    from reconcile.commands import workspaces as command

    return command.run(root, changed_from, as_json)


@app.command()
def claim(directory: Path = DIR,
          move_from: str | None = typer.Option(None, "--move-from", metavar="OLD",
                                               help="The owner the claim moves from: its directory (a renamed "
                                                    "directory), its repository (a split repository), or "
                                                    "REPOSITORY:DIRECTORY."),
          yes: bool = typer.Option(False, "--yes", help="Do not ask before moving or replacing a claim.")) -> int:
    """Claim the workspace's name on its shared roots for this repository and directory, or move a claim
    here (audited). The first apply claims a name by itself (docs/workspaces.md)."""
    from reconcile.commands import claim as command

    return command.run(directory, move_from, yes)


@app.command()
def unlock(lock_id: str = typer.Argument(..., help="The id printed by the apply that is refused."),
           directory: Path = DIR) -> int:
    """Break the apply lock of a dead apply; the audit log records it."""
    from reconcile.commands import unlock as command

    return command.run(directory, lock_id)


@app.command()
def status(directories: list[Path] = DIRS, timeout: float = TIMEOUT, output_format: Format = FORMAT,
           as_json: bool = JSON,
           watch: float | None = typer.Option(None, "--watch", help="Refresh every SECONDS until every run "
                                                                   "has finished."),
           all_workspaces: bool = ALL_WORKSPACES,
           run: str | None = typer.Option(None, "--run", metavar="SUBMISSION_ID", help="The analysis report of one "
                                          "run's interruption, from its incident record (docs/incidents.md).")) -> int:
    """Per job: in sync / changed / missing, and the health of its run on Ray."""
    from reconcile.commands import status as command

    if run is not None:
        from reconcile.commands import incident

        return incident.run((directories or [Path(".")])[0], run, "json" if as_json else output_format.value)
    return command.run_all(directories or [Path(".")], timeout, "json" if as_json else output_format.value, watch,
                           all_workspaces)


@app.command()
def doctor(directories: list[Path] = DIRS,
           timeout: float = typer.Option(60.0, "--timeout", min=1.0, help="Seconds the probe job may take to start "
                                         "and end on each cluster; each request to a dashboard waits at most 10 of "
                                         "them."),
           as_json: bool = typer.Option(False, "--json", help='Machine-readable: {"ok", "clusters": [{"cluster", '
                                        '"ok", "checks": [{"check", "level", "message"}], "facts"}]}.')) -> int:
    """Pre-flight check of each cluster: dashboard, Ray version, auth, GPUs, clock skew, and one probe job proving
    the shared root its nodes write is the one argus reads (and whether jobs can write argus's state there).
    The probe is deleted and its files removed. Exit 0 when every check passes (warnings allowed), 1 otherwise."""
    from reconcile.commands import doctor as command

    return command.run_all(directories or [Path(".")], timeout, as_json)


@app.command()
def queue(directory: Path = DIR, timeout: float = TIMEOUT,
          as_json: bool = typer.Option(False, "--json", help="Machine-readable output (docs/plan-format.md).")) -> int:
    """Each cluster's whole admission queue, every workspace's: runs holding GPUs, waiting jobs with their
    place and why, GPUs held per workspace, quotas."""
    from reconcile.commands import queue as command

    return command.run(directory, timeout, as_json)


class UsageKey(str, Enum):
    workspace = "workspace"
    job = "job"
    actor = "actor"


USAGE_BY = typer.Option(UsageKey.workspace, "--by", help="Sum by workspace, job (WORKSPACE/JOB) or actor (who "
                        "applied the run's plan, from the audit log; else unknown).")


@app.command()
def usage(directory: Path = DIR,
          since: str | None = typer.Option(None, "--since", help="Count only the GPU-hours from this ISO date or "
                                           "time on (UTC unless it names a zone); runs that ended before it are "
                                           "left out."),
          by: UsageKey = USAGE_BY,
          as_json: bool = typer.Option(False, "--json", help="A JSON list of objects, one a row."),
          inputs: bool = typer.Option(False, "--inputs", help="Bytes of each sealed Dataset and Model version and "
                                      "of each workspace's, and how many runs name each version, instead.")) -> int:
    """GPU-hours and run counts of every workspace's runs on the shared roots, from their records. Offline."""
    if inputs:
        from reconcile.commands import usage_inputs

        return usage_inputs.run(directory, as_json)
    from reconcile.commands import usage as command

    return command.run(directory, by.value, since, as_json)


@app.command()
def logs(job: str = typer.Argument(..., help="Job name."), directory: Path = DIR, timeout: float = TIMEOUT,
         follow: bool = typer.Option(False, "--follow", "-f", help="Stream the log until the run ends."),
         run_id: str | None = typer.Option(None, "--run", help="This run (a submission id), not the current one."),
         attempt: int | None = typer.Option(None, "--attempt", min=1, help="This attempt of the current run's spec."),
         as_json: bool = JSON) -> int:
    """Print the driver log of a job's run: the copy the run kept on NFS, else Ray's."""
    from reconcile.commands import logs as command

    return command.run(directory, job, timeout, follow, as_json, run_id, attempt)


class SyncMode(str, Enum):
    off = "off"
    auto = "auto"


class LogFormat(str, Enum):
    text = "text"
    json = "json"


SYNC = typer.Option(SyncMode.off, "--sync", help="off: keep records, retry failed runs, report drift; auto: also "
                   "apply the rest of the plan, as `argus apply --auto-approve` would.")
NOTIFY = typer.Option([], "--notify", help="An apprise URL to send events to (slack://, feishu://, dingtalk://, "
                      "wecombot://, mailto://, json://...); repeatable. docs/notifications.md.")
LOG_FORMAT = typer.Option(LogFormat.text, "--log-format", help="text or json: one line a turn.")
SHARED_SECRET = typer.Option([], "--shared-secret", help="A variable several served workspaces may all list in "
                             "`secrets:`, their jobs all receiving its one value; repeatable. Without it, two "
                             "lists naming one variable are refused (docs/serve.md).")


@app.command()
def serve(directories: list[Path] = DIRS,
          interval: float = typer.Option(30.0, "--interval", min=1.0, help="Seconds between turns."),
          sync: SyncMode = SYNC,
          git_pull: bool = typer.Option(False, "--git-pull", help="Fast-forward the checkout from its upstream "
                                        "before each turn; a dirty or diverged checkout is reported, not applied."),
          notify: list[str] = NOTIFY,
          pending_alert: float = typer.Option(600.0, "--pending-alert", min=1.0,
                                              help="Seconds a run may stay PENDING before it is reported."),
          stall_alert: float = typer.Option(1800.0, "--stall-alert", min=1.0, help="Seconds a running run's log on "
                                            "the shared filesystem may stay unchanged before it is reported."),
          drift_grace: float = typer.Option(900.0, "--drift-grace", min=0.0, help="Seconds a merged change may wait "
                                            "for its apply (CI's, on merge) before it is told as drift; runs stopped "
                                            "outside argus are told at once. 0: at once."),
          listen: str | None = typer.Option(None, "--listen", help="HOST:PORT for /metrics, /healthz and the "
                                            "status page."),
          once: bool = typer.Option(False, "--once", help="One turn, then exit (cron, tests)."),
          log_format: LogFormat = LOG_FORMAT,
          public_url: str | None = typer.Option(None, "--public-url", help="The status page's address as people "
                                                "reach it (behind a proxy); notifications link to it and to "
                                                "logs under it. Default: the --listen address."),
          stop_timeout: float = typer.Option(120.0, "--stop-timeout",
                                             help="Seconds to wait for a stopped job to reach a final status."),
          watch: float = typer.Option(1.0, "--watch", min=0.0, help="Seconds between polls of each cluster's job "
                                      "list between turns (at least 0.2): a job that ends, fails or frees room "
                                      "starts a turn at once. 0: off (turns only every interval)."),
          shared_secret: list[str] = SHARED_SECRET,
          timeout: float = TIMEOUT) -> int:
    """Keep watch: every interval load, observe, plan; keep records, retry, notify, and with --sync auto apply.
    Several DIRs (or a repository root): one loop and one lease per workspace, one page (docs/serve.md)."""
    from reconcile.commands import serve as command
    from reconcile.serve.turn import TurnOptions

    turn = TurnOptions(sync=sync.value, git_pull=git_pull, interval=interval, timeout=timeout,
                       stop_timeout=stop_timeout, pending_alert=pending_alert, stall_alert=stall_alert,
                       drift_grace=drift_grace,
                       with_audit=listen is not None)
    options = command.ServeOptions(turn=turn, notify=tuple(notify), listen=listen, once=once,
                                   log_format=log_format.value, watch=watch, public_url=public_url,
                                   shared_secrets=tuple(shared_secret))
    return command.run(directories or [Path(".")], options)


@audit_app.command("verify")
def audit_verify(directory: Path = DIR) -> int:
    """Check the hash chain: name any edited, removed, inserted or reordered record (exit 1)."""
    from reconcile.commands import audit as command

    return command.verify(directory)


@audit_app.command("show")
def audit_show(directory: Path = DIR, as_json: bool = typer.Option(False, "--json", help="One JSON record a line."),
               job: str | None = typer.Option(None, "--job", help="Only this job's actions."),
               since: str | None = typer.Option(None, "--since", help="Only records from this ISO time on.")) -> int:
    """Read the audit log: what ran, from which commit, by whom."""
    from reconcile.commands import audit as command

    return command.show(directory, as_json, job, since)


SCRIPT = typer.Argument(..., help="The verl launch script (bash).")
SCRIPT_ARGS = typer.Argument(None, help="Arguments the script gets (its $@).", show_default=False)
IMPORT_DIR = typer.Option(Path("."), "--dir", help="The workspace directory.")
IMPORT_NAME = typer.Option(None, "--name", help="The job's name (default: from the script's file name).")
RAY_JOB_NAME = typer.Option(None, "--name", help="The job's name (default: from the submission id).")
IMPORT_CLUSTER = typer.Option(None, "--cluster", help="The Cluster (default: the workspace's only one).")
IMPORT_CODE = typer.Option(None, "--code", help="The CodeSnapshot (default: the cluster's only one).")
IMPORT_ENV = typer.Option([], "--env", metavar="NAME=VALUE", help="A variable the script finds in its environment "
                          "(as `NAME=VALUE bash FILE` would), e.g. for a value it would take from a command's "
                          "output. Repeatable. For the script only: not written to the job.")
IMPORT_OUTPUT = typer.Option(None, "--output", help="Where to write the spec (default: jobs/NAME.yaml in the "
                             "workspace); never overwritten.")


@import_app.command("verl-script", context_settings={"allow_interspersed_args": False})
def import_verl_script(script: Path = SCRIPT, args: list[str] = SCRIPT_ARGS, directory: Path = IMPORT_DIR,
                       name: str | None = IMPORT_NAME, cluster: str | None = IMPORT_CLUSTER,
                       code: str | None = IMPORT_CODE, output: Path | None = IMPORT_OUTPUT,
                       variables: list[str] = IMPORT_ENV) -> int:
    """Turn a verl launch script into a Job spec. The script's commands are never run: bash reads it with
    every command replaced by a stand-in that only records it (no PATH, restricted mode, no output
    redirection, no inherited variables), so its variables, arrays, `${VAR:-default}` and `$@` expand as
    bash would; then the launch found is mapped as docs/verl.md maps one. Options go before SCRIPT: what follows
    it is the script's own arguments."""
    from reconcile.commands import import_verl_script as command

    return command.run(directory, script, args or [], name, cluster, code, output, variables)


@import_app.command("ray-job")
def import_ray_job(submission_id: str = typer.Argument(..., help="The Ray job's submission id."),
                   directory: Path = IMPORT_DIR, name: str | None = RAY_JOB_NAME,
                   cluster: str | None = IMPORT_CLUSTER, timeout: float = TIMEOUT) -> int:
    """Adopt a job already running on Ray (submitted by hand) as a run of this workspace: a spec that reproduces
    its submission, and an audit record that makes it this workspace's run, so the next plan shows it in sync.
    The job is never stopped or submitted; a finished job, one argus submitted, or one a workspace already
    holds is refused."""
    from reconcile.commands import import_ray_job as command

    return command.run(directory, submission_id, name, cluster, timeout)


@local_app.command("up")
def local_up(state_dir: Path = LOCAL_DIR,
             dashboard_port: int = typer.Option(8265, "--dashboard-port", envvar="ARGUS_LOCAL_PORT", min=0,
                                                max=65535, help="Port of the Ray dashboard (or $ARGUS_LOCAL_PORT); "
                                                                "0: any free port."),
             auth_token: bool = typer.Option(False, "--auth-token", help="Turn on Ray's token authentication "
                                             "(RAY_AUTH_MODE=token) with a fresh random token, written to "
                                             "auth_token in the state directory (mode 0600); a Cluster's "
                                             "`auth_token:` points at that file."),
             worker_gpus: int = typer.Option(0, "--worker-gpus", min=0, help="Logical GPUs on the worker "
                                             "(`ray start --num-gpus`); no real GPU is needed or used."),
             worker_cpus: int = typer.Option(4, "--worker-cpus", min=0, help="Logical CPUs on the worker; verl "
                                             "asks 3 per GPU (PPO), plus 1 for the driver."),
             worker_resources: str | None = typer.Option(
                 None, "--worker-resources", metavar="JSON", help='The worker\'s custom resources, e.g. '
                 '\'{"worker_node": 1, "rack_a": 2}\': merged over worker_node=4, which stays unless the JSON '
                 "sets it (0 leaves a resource out).")) -> int:
    """Start the local cluster and print its dashboard address and node shapes."""
    from reconcile.commands import local as command

    return command.up(state_dir, dashboard_port, auth_token, worker_gpus, worker_cpus, worker_resources)


@local_app.command("down")
def local_down(state_dir: Path = LOCAL_DIR) -> int:
    """Stop exactly the processes `argus local up` started."""
    from reconcile.commands import local as command

    return command.down(state_dir)


@local_app.command("status")
def local_status(state_dir: Path = LOCAL_DIR, as_json: bool = JSON) -> int:
    """Show the local cluster's address and processes."""
    from reconcile.commands import local as command

    return command.status(state_dir, as_json)


def main(argv: list[str] | None = None) -> int:
    """Entry point: the whole dispatch, parsing included, inside the one error boundary. Typer's own
    exit handling is not used: usage errors exit 1, not 2, which `plan --detailed-exitcode` reserves
    for "changes present", and a ^C reaches the boundary as itself. A command line asking for JSON
    gets its errors as JSON too."""
    args = sys.argv[1:] if argv is None else argv
    gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])
    own_process = argv is None  # the process's own command, not one of many run in one process (tests)
    if own_process:
        gc.freeze()  # its imports live as long as it does: older generations' collections need not walk them
    try:
        return guarded(lambda invocation: _dispatch(args, invocation), as_json=wants_json(args))
    finally:
        if own_process:  # nor need the interpreter's last collection at exit walk what the command made:
            gc.freeze()  # ~0.15 s at the end of every command


def _dispatch(args: list[str], invocation: Invocation) -> object:
    command = typer.main.get_command(app)
    with command.make_context("argus", list(args), obj=invocation) as ctx:
        return command.invoke(ctx)


if __name__ == "__main__":
    sys.exit(main())
