"""Pydantic models of every argus resource: the whole schema of the desired state in one place."""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, StringConstraints, ValidationInfo, field_validator, model_validator

from specs.base import Frozen
from specs.duration import Duration
from specs.kinds import held_variables
from specs.kinds.git_urls import check_git_ref, check_git_token, check_git_url, check_source_path
from specs.kinds.health import Health
from specs.kinds.notifications import Notifications
from specs.kinds.transport import AuthHeader, ClusterTls, check_cookies, check_headers
from specs.secrets import secret_names

NAME_PATTERN = r"^[a-z0-9][a-z0-9-]{0,62}$"
SECRET_REF_PATTERN = r"^\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}$"
ADDRESS_PATTERN = r"^https?://[^/\s?#]+(/[^\s?#]*)?$"
"""A dashboard URL, optionally under a path prefix (a service proxy, an ingress on a sub-path)."""
TOKEN_REF_PATTERN = r"^(\$\{env:[A-Za-z_][A-Za-z0-9_]*\}|/.*|~/.*)$"
"""A Cluster's auth_token: a reference to the token, never the token (check_token_reference explains)."""
NO_OPTION_PATTERN = r"^[^-\s]\S*$"
MODULE_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"
CONFIG_DIR_PATTERN = r"^[A-Za-z0-9_-][A-Za-z0-9_./-]*$"
"""Relative, inside the snapshot (Entry also refuses `.` and `..` components)."""
CONFIG_NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$"
"""For editors (JSON Schema): the loader's own checks of git sources are stricter and explain themselves."""

MAX_COUNT = 2**53
"""Every integer of a spec stays below this: a 5,000-digit hex number would pass YAML and pydantic,
then break hashing and JSON later (Python refuses to print ints over 4,300 digits)."""

MAX_PRIORITY = 1_000_000
Name = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]
MAX_AFTER = 64
"""Predecessors one job may wait on: a pipeline's join, not a whole workspace (a plan weighs every predecessor
of every job: 1,000 jobs each after all earlier ones made a plan take minutes and run out of memory)."""
Resources = dict[str, Annotated[float, Field(ge=0)]]
VARIABLE_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"


def check_not_held(value: str) -> str:
    """A `${env:NAME}` never names a variable argus holds for itself (specs.kinds.held_variables): checked per
    value, so the error points at the line of the variable that names it."""
    match = re.match(SECRET_REF_PATTERN, value)
    if match and held_variables.held(match.group(1)):
        raise ValueError(held_variables.refusal(match.group(1)))
    return value


def check_variable(name: str) -> str:
    if held_variables.held(name):
        raise ValueError(held_variables.refusal(name))
    return name


EnvValue = Annotated[str, AfterValidator(check_not_held)]
"""A job's env value: text, or `${env:NAME}` read at submit (never a variable argus holds)."""
Variable = Annotated[str, StringConstraints(pattern=VARIABLE_PATTERN), AfterValidator(check_variable)]
"""An environment variable's name a workspace lets its jobs read (never one argus holds)."""


MAX_INCLUDES = 16
INCLUDE_PATTERN = r"^[^/\x00-\x1f\x7f][^\x00-\x1f\x7f]*\.(yaml|yml)$"


def check_include(path: str) -> str:
    """Told apart here so the error says which rule an entry breaks (the pattern is for editors)."""
    if path.startswith("/") or not path:
        raise ValueError("an included file is named relative to the workspace root, e.g. ../../platform/clusters.yaml")
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        raise ValueError("control characters and NUL are not allowed")
    if not path.endswith((".yaml", ".yml")):
        raise ValueError("an included file is a .yaml or .yml spec file (one file per entry, not a directory)")
    return path


IncludePath = Annotated[str, Field(max_length=1024, json_schema_extra={"pattern": INCLUDE_PATTERN}),
                        AfterValidator(check_include)]
"""A shared spec file, relative to the workspace root (specs/load/includes.py reads it as hostile input)."""


class Spec(Frozen):
    """Base of every resource spec (see Frozen for why it is strict and immutable). Its fields' docstrings
    are their descriptions in the JSON Schema, which editors show (specs/schema/schema.py reads them)."""


class Workspace(Spec):
    """The owner of everything argus submits; exactly one, in argus.yaml at the workspace root."""

    kind: Literal["Workspace"]
    name: Name
    """Stamped as `argus.workspace` on every job; jobs with another value are never touched."""
    description: str = ""
    notifications: Notifications = Notifications()
    """Where `argus serve` sends this workspace's events, and what they say (docs/notifications.md)."""
    secrets: list[Variable] = []
    """The environment variables of the machine argus runs on that this workspace's jobs may read, as
    `env: {KEY: ${env:NAME}}`: reviewed here, in git, once for the whole team (docs/concepts.md, Secrets).
    Never argus's own (ARGUS_*, GIT_TOKEN_*, dashboard and notification credentials)."""
    include: list[IncludePath] = Field(default=[], max_length=MAX_INCLUDES)
    """Spec files, relative to this workspace's root and inside its git repository, whose `kind: Cluster`
    definitions this workspace uses too (e.g. ../../platform/clusters.yaml): one shared definition for every
    team of a monorepo. One file per entry (no directories); only Clusters, with an absolute shared_root."""


class NodeExpectation(Spec):
    """What the cluster is expected to have; checked against alive nodes, never created."""

    role: Literal["head", "worker"]
    count: int = Field(ge=0, le=MAX_COUNT)
    resources: Resources = {}


class JobDefaults(Spec):
    """The v1.1 "RayConfig": submission settings every job of a cluster inherits."""

    entrypoint_num_cpus: float | None = Field(default=None, ge=0)
    entrypoint_num_gpus: float | None = Field(default=None, ge=0)
    entrypoint_memory: int | None = Field(default=None, ge=0, le=MAX_COUNT)
    entrypoint_resources: Resources = {}
    """Custom resources the driver needs, e.g. {worker_node: 1} to keep it off the head."""
    env: dict[str, EnvValue] = {}

    @field_validator("env")
    @classmethod
    def _whole_value_references(cls, env: dict[str, str]) -> dict[str, str]:
        return check_env_references(env)


class Cluster(Spec):
    """A Ray cluster argus submits to, and the shared filesystem its nodes see."""

    kind: Literal["Cluster"]
    name: Name
    address: str
    """The Ray dashboard URL, optionally under a path prefix (https://host/prefix/); must carry http(s)://
    (without it Ray dials GCS and hangs)."""
    shared_root: str = Field(min_length=1)
    """NFS mount seen by argus and every node; a relative path is taken from the workspace root."""
    description: str = ""
    admin: Name | None = None
    """The workspace that administers the cluster: the only one whose `kind: Quotas` sets its quotas (as a
    Kueue ClusterQueue belongs to the cluster's administrator, not to the teams whose queues it caps)."""
    nodes: list[NodeExpectation] = []
    job_defaults: JobDefaults = JobDefaults()
    user_code_path: str = "${shared_root}/user/code"
    """Second entry of every job's PYTHONPATH, after its code snapshot (seed 001)."""
    auth_token: str | None = Field(default=None, json_schema_extra={"pattern": TOKEN_REF_PATTERN})
    """Where the dashboard's token is (RAY_AUTH_MODE=token): `${env:NAME}` or a token file (absolute or
    ~/...), read when argus connects. Never the token itself: the spec holds only where it is."""
    auth_header: AuthHeader = "Authorization"
    """The header the token travels in: X-Ray-Authorization where a proxy (Kubernetes' service proxy) strips
    Authorization."""
    tls: ClusterTls = ClusterTls()
    """CA bundle and client certificate used by every request to the dashboard, the log stream included."""
    headers: dict[str, str] = {}
    """Extra headers an authenticating proxy wants, each value a reference (specs.kinds.transport.REFERENCE_RULE)."""
    cookies: dict[str, str] = {}
    """Cookies an authenticating proxy wants, each value a reference, as for headers."""

    @field_validator("address")
    @classmethod
    def _dashboard_url(cls, address: str) -> str:
        if not re.match(ADDRESS_PATTERN, address):
            raise ValueError("must be the dashboard URL, like http://10.0.0.1:8265 or https://host/prefix/ (with "
                             "http:// or https://, no ?query or #fragment; without the scheme Ray would dial the GCS "
                             "port and hang)")
        return address

    @field_validator("shared_root")
    @classmethod
    def _sane_shared_root(cls, shared_root: str) -> str:
        reason = shared_root_problem(shared_root)
        if reason:
            raise ValueError(f"{reason}; {SHARED_ROOT_RULE}")
        return shared_root

    @field_validator("auth_token")
    @classmethod
    def _token_reference(cls, auth_token: str | None) -> str | None:
        return None if auth_token is None else check_token_reference(auth_token)

    @field_validator("headers")
    @classmethod
    def _header_references(cls, headers: dict[str, str]) -> dict[str, str]:
        return check_headers(headers)

    @field_validator("cookies")
    @classmethod
    def _cookie_references(cls, cookies: dict[str, str]) -> dict[str, str]:
        return check_cookies(cookies)


class GitSource(Spec):
    """Where a snapshot's code comes from. Specs are data: both fields pass an allow-list here, so
    nothing a pull request writes can reach git as an option or as a program to run."""

    url: str = Field(min_length=1, json_schema_extra={"pattern": NO_OPTION_PATTERN})
    """A local path, file:///path, https://host/path, ssh://[user@]host/path or user@host:path; a relative
    path is taken from the workspace root."""
    ref: str = Field(min_length=1, json_schema_extra={"pattern": NO_OPTION_PATTERN})
    """A tag, branch or commit; resolved once, then the snapshot holds that commit forever."""
    token: str | None = Field(default=None, json_schema_extra={"pattern": r"^\$\{env:GIT_TOKEN_[A-Z0-9_]+\}$"})
    """https only: `${env:GIT_TOKEN_<HOST>}`, the variable named for the url's host (GIT_TOKEN_GITHUB_COM for
    github.com), read when git fetches and sent to that url alone; never the token itself, never stored."""

    @field_validator("url")
    @classmethod
    def _allowed_url(cls, url: str) -> str:
        return check_git_url(url)

    @field_validator("ref")
    @classmethod
    def _ref_name(cls, ref: str) -> str:
        return check_git_ref(ref)

    @field_validator("token")
    @classmethod
    def _token_for_host(cls, token: str | None, info: ValidationInfo) -> str | None:
        url = info.data.get("url")
        return token if token is None or url is None else check_git_token(url, token)


class CodeSnapshot(Spec):
    """Immutable code on the shared filesystem: <shared_root>/common/code/<repo>/<name>/."""

    kind: Literal["CodeSnapshot"]
    name: Name
    cluster: Name
    git: GitSource | None = None
    path: str | None = None
    """A local working copy (relative to the workspace root): its HEAD commit is snapshotted."""
    allow_dirty: bool = Field(default=False, strict=True)
    """For `path:` only: snapshot uncommitted working files too (the digest covers them)."""
    repo: Name | None = None
    """Directory under common/code/; defaults to the source's base name."""
    description: str = ""

    @field_validator("path")
    @classmethod
    def _plain_path(cls, path: str | None) -> str | None:
        return None if path is None else check_source_path(path)

    @model_validator(mode="after")
    def _one_source(self) -> CodeSnapshot:
        if (self.git is None) == (self.path is None):
            raise ValueError("give exactly one source: `git: {url, ref}` or `path:`")
        if self.allow_dirty and self.git is not None:
            raise ValueError("allow_dirty applies to `path:` sources only")
        return self

    @property
    def repo_dir(self) -> str:
        if self.repo:
            return self.repo
        source = self.git.url if self.git else self.path or ""
        base = re.sub(r"\.git$", "", source.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1])
        return re.sub(r"[^a-z0-9-]", "-", base.lower()).strip("-") or "code"


Paths = Annotated[str, Field(min_length=1)] | Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1)]
"""One file, or a list of files verl reads together (data.train_files accepts both)."""
Freq = Annotated[int, Field(ge=-MAX_COUNT, le=MAX_COUNT, strict=True)] | Literal["after_each_epoch"]
"""Steps between saves or validations; the SFT trainers also take `after_each_epoch`."""


class Data(Spec):
    train: Paths
    """A file on the shared filesystem (`${shared_root}/...` or an absolute path), or a list of them."""
    val: Paths | None = None


class DeclaredPool(Spec):
    """A resource pool a recipe places beside the trainer's, as its placement code asks Ray for it:
    `nnodes` placement groups of `gpus_per_node` bundles, one per node (docs/verl.md, "Declaring a recipe's demand")."""

    name: Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_-]{0,62}$")]
    """The recipe's own name for it (rollout_pool): shown in plans beside global_pool."""
    nnodes: int = Field(ge=1, le=10_000, strict=True)
    gpus_per_node: int = Field(ge=1, le=10_000, strict=True)
    cpus_per_gpu: float = Field(default=3, ge=0, le=1_000)
    """CPUs each bundle asks per GPU: verl's ResourcePoolManager asks 3 (max_colocate_count), a standalone
    rollout replica 2."""
    nnodes_key: Annotated[str, StringConstraints(pattern=MODULE_PATTERN)] | None = None
    """A key of the composed config that must hold `nnodes` (rollout.nnodes): a plan checks they agree."""
    gpus_per_node_key: Annotated[str, StringConstraints(pattern=MODULE_PATTERN)] | None = None
    """A key of the composed config that must hold `gpus_per_node` (rollout.n_gpus_per_node)."""


class RecipeDemand(Spec):
    """What a recipe argus does not know asks Ray for beyond the trainer's pool, which argus always counts."""

    pools: list[DeclaredPool] = Field(default_factory=list, max_length=32)
    """Pools placed beside the trainer's global_pool (from `trainer:`)."""
    cpus: float = Field(default=0, ge=0, le=100_000)
    """CPUs the recipe's actors outside placement groups hold, its TaskRunner included (its
    `@ray.remote(num_cpus=...)`): counted instead of argus's own guess."""


class Entry(Spec):
    """Which verl entry point runs the job, when not the workload's default (docs/verl.md)."""

    module: Annotated[str, StringConstraints(pattern=MODULE_PATTERN)] | None = None
    """The Python module run with -m: verl.trainer.main_ppo (ppo, grpo), verl.trainer.sft_trainer_ray
    (sft), verl.trainer.sft_trainer (sft under torchrun), or a recipe's (recipe.dapo.main_dapo)."""
    config_dir: Annotated[str, StringConstraints(pattern=CONFIG_DIR_PATTERN)] | None = None
    """The Hydra config directory, relative to the code snapshot (--config-path); default
    verl/trainer/config. A recipe's own (recipe/dapo/config) reaches verl's through its searchpath."""
    config_name: Annotated[str, StringConstraints(pattern=CONFIG_NAME_PATTERN)] | None = None
    """--config-name: ppo_megatron_trainer, a recipe's dapo_trainer, ...; default per workload."""
    launcher: Literal["ray", "torchrun"] = "ray"
    """`torchrun` (sft only): the trainer runs as torchrun's processes on the driver's node, which then
    holds the job's GPUs; one node only."""
    demand: RecipeDemand | None = None
    """What a recipe argus does not know places beside the trainer's pool (docs/verl.md): its pools
    and the CPUs of its actors, checked against the composed config where keys are named."""

    @field_validator("config_dir")
    @classmethod
    def _inside_snapshot(cls, config_dir: str | None) -> str | None:
        if config_dir is not None and any(part in (".", "..") for part in config_dir.split("/")):
            raise ValueError("must be a folder inside the code snapshot, like recipe/dapo/config (no . or ..)")
        return config_dir


class Trainer(Spec):
    """The verl trainer settings argus types (and checks); everything else goes in `overrides:`."""

    nnodes: int = Field(default=1, ge=1, le=10_000, strict=True)
    """At most 10,000: more than any cluster has, and a plan lists a placement bundle per node."""
    n_gpus_per_node: int = Field(default=1, ge=1, le=10_000, strict=True)
    total_training_steps: int | None = Field(default=None, ge=1, le=MAX_COUNT, strict=True)
    """When both are given, verl trains this many steps (it overrides what total_epochs implies)."""
    total_epochs: int | None = Field(default=None, ge=1, le=MAX_COUNT, strict=True)
    save_freq: Freq | None = None
    test_freq: Freq | None = None
    logger: Annotated[str, Field(min_length=1)] | list[str] | None = None
    """`console` or a list (`[console, wandb]`): verl takes both."""
    project: str | None = None
    """trainer.project_name; defaults to the workspace name."""
    experiment: str | None = None
    """trainer.experiment_name; defaults to the job name."""
    device: str | None = None
    """trainer.device; unset leaves verl's own default (cuda). Never `cpu` for a job that trains on GPUs:
    verl 0.8 asks Ray for a resource named after it, which no node has."""
    checkpoint_dir: str | None = None
    """trainer.default_local_dir; defaults to ${shared_root}/outputs/<workspace>/checkpoints/<job>/run-<run>."""


RetryableClass = Literal["oom", "nccl_timeout", "node_lost", "runtime_env_setup", "start_timeout", "unknown", "lost",
                         "deadline"]


class Retry(Spec):
    """New attempts of a failed run (same checkpoint directory, so verl resumes), for these classes only.

    config_error, import_error, user_code and stopped are never retried: they would fail the same way.
    """

    max_attempts: int = Field(ge=1, le=MAX_COUNT, strict=True)
    """Attempts in all, the first one included."""
    on: list[RetryableClass] = Field(min_length=1)


class Job(Spec):
    """A Ray job argus keeps submitted (state: running) or stopped."""

    kind: Literal["Job"]
    name: Name
    cluster: Name
    """Name of the Cluster resource the job runs on."""
    workload: Literal["command", "ppo", "grpo", "sft"]
    """`command` runs `entrypoint`; ppo, grpo and sft run verl from the job's code snapshot."""
    code: Name | None = None
    """A CodeSnapshot on the same cluster: the job runs from it (cd + PYTHONPATH)."""
    entrypoint: Annotated[list[str], Field(min_length=1)] | Annotated[str, Field(min_length=1)] | None = None
    """`command` only: argv (joined with shlex) or a shell string; Ray runs it with /bin/sh -c."""
    model: str | None = None
    """verl only: a path on the shared filesystem, or a hub id cached under the shared root's hf/."""
    data: Data | None = None
    trainer: Trainer | None = None
    entry: Entry | None = None
    """verl only: another entry module, config directory or launcher than the workload's default."""
    overrides: list[str] = []
    """verl only: Hydra overrides, passed through after argus's own."""
    description: str = ""
    """Cosmetic: outside the spec hash, changing it never replaces a run."""
    env: dict[str, EnvValue] = {}
    """Merged over the cluster's job_defaults.env; `${env:NAME}` is read at submit time, NAME one of the
    Workspace's `secrets:`."""

    @field_validator("env")
    @classmethod
    def _whole_value_references(cls, env: dict[str, str]) -> dict[str, str]:
        return check_env_references(env)
    entrypoint_num_cpus: float | None = Field(default=None, ge=0)
    entrypoint_num_gpus: float | None = Field(default=None, ge=0)
    entrypoint_memory: int | None = Field(default=None, ge=0, le=MAX_COUNT)
    entrypoint_resources: Resources | None = None
    """Replaces (not merges) the cluster default when given."""
    state: Literal["running", "stopped"] = "running"
    protect: bool = Field(default=False, strict=True)
    """When true, any plan that would stop or replace this job's run is an error."""
    run: int = Field(default=1, ge=1, le=MAX_COUNT, strict=True)
    """Bump to ask for a new run of an otherwise unchanged spec."""
    retry: Retry | None = None
    on_drift: Literal["report", "restart"] = "report"
    """A run stopped (or deleted while it ran) outside argus: `report` shows it as drift and leaves it
    stopped (someone stopped it on purpose); `restart` starts it again as a new attempt (apply, and
    `argus serve` even without --sync auto). Outside the spec hash."""
    priority: int = Field(default=0, ge=-MAX_PRIORITY, le=MAX_PRIORITY, strict=True)
    """Place in the cluster's admission queue: higher first, then first come. Outside the spec hash:
    changing it never replaces a run."""
    preemptible: bool = Field(default=False, strict=True)
    """May be stopped for a higher-priority job that cannot otherwise fit; it waits in the queue again."""
    demand: Resources | None = None
    """`command` only: everything the job holds at once, its driver included ({GPU: 2, CPU: 4}); it
    starts only when all of it is free. Default: the driver's own resources. verl jobs derive theirs
    from `trainer`. Outside the spec hash."""
    max_runtime: Duration | None = None
    """How long a run may last, from when Ray accepted it ("90m", "2h", "1h30m", "1d", or seconds): argus
    stops it then and classes its end `deadline` (retried only if `retry.on` names it). verl saves a
    checkpoint shortly before (docs/verl.md). Outside the spec hash: a change applies to the run under way."""
    after: list[Name] | dict[Name, Literal["succeeded", "finished"]] | None = None
    """Jobs of this workspace whose current run must have ended first (at most 64): a list means `succeeded` for
    each; `{train: finished}` also accepts a failed or stopped end. Outside the spec hash (docs/pipelines.md)."""
    @field_validator("after")
    @classmethod
    def _few_predecessors(cls, value: list[str] | dict[str, str] | None) -> list[str] | dict[str, str] | None:
        if value is not None and len(value) > MAX_AFTER:
            raise ValueError(f"names {len(value)} jobs; a job waits on at most {MAX_AFTER}: let a job that waits on "
                             "some of them stand for them (docs/pipelines.md)")
        return value

    rerun_with_predecessors: bool = Field(default=False, strict=True)
    """When a predecessor runs again and ends as required, run this job again too. Default: a job that
    already ran its current spec is not run again (the plan says so); bump `run:` to ask once."""
    health: Health | None = None
    """When the run counts as idle or stalled, and whether argus only tells (`alert`) or also stops it
    (`stop`, never for a `protect: true` job). Outside the spec hash (docs/incidents.md)."""

    @field_validator("health")
    @classmethod
    def _never_stops_protected(cls, value: Health | None, info: ValidationInfo) -> Health | None:
        if value is not None and value.stops_when_idle() and info.data.get("protect"):
            raise ValueError("idle.action `stop` would stop a `protect: true` job, which nothing may stop: "
                             "use `action: alert`, or drop `protect`")
        return value


def check_env_references(env: dict[str, str]) -> dict[str, str]:
    """`${env:NAME}` must be a whole value: half a reference would reach Ray as literal text. The value
    is not quoted: what surrounds the reference may be a secret. (Literal secrets, by key name and by
    value, are specs.secrets.secret_scan's: it reports all of them at once.)"""
    for key, value in env.items():
        if "${env:" in value and not re.match(SECRET_REF_PATTERN, value):
            raise ValueError(f"{key}: `${{env:NAME}}` must be the whole value, with NAME a valid variable name")
        if re.match(SECRET_REF_PATTERN, value) and not secret_names.allowed(key):
            raise ValueError(f"{key!r}: {secret_names.RULE}")
    return env


# A pull request writes both a cluster's address and its auth_token. Were any variable or file
# allowed, one line would send the runner's GITHUB_TOKEN or ~/.git-credentials, as a Bearer header,
# to a host of the author's choosing during `argus plan`. Only names that say "Ray token" are read.
TOKEN_VARIABLE_RULE = ("auth_token may name only a variable whose name contains RAY and TOKEN (like "
                       "RAY_AUTH_TOKEN or PROD_RAY_TOKEN): argus sends it to the cluster's address, so it must "
                       "never read another secret of the machine it runs on")
TOKEN_FILE_RULE = ("a token file must be named auth_token (Ray's own name, as in ~/.ray/auth_token) or have "
                   "ray and token in its name (like /run/secrets/prod-ray.token): argus sends its content to the "
                   "cluster's address, so it must never read another secret file of the machine it runs on")


def is_token_variable(name: str) -> bool:
    upper = name.upper()
    return "RAY" in upper and "TOKEN" in upper


def is_token_file_name(name: str) -> bool:
    lower = name.lower()
    return lower == "auth_token" or ("ray" in lower and "token" in lower)


def check_token_reference(reference: str) -> str:
    """`${env:NAME}`, an absolute path or `~/...`. Anything else is refused without being echoed: it
    may be the token itself, which must stay out of git, plans and messages. A relative path is
    refused too: it would name a file in the workspace, that is in git, where a pull request writes."""
    variable = re.match(SECRET_REF_PATTERN, reference)
    if variable:
        if not is_token_variable(variable.group(1)):
            raise ValueError(TOKEN_VARIABLE_RULE)
        return reference
    if "${env:" in reference:
        raise ValueError("`${env:NAME}` must be the whole value, with NAME a valid variable name")
    if any(ord(c) < 32 or ord(c) == 127 for c in reference):
        raise ValueError("control characters and NUL are not allowed")
    if reference.startswith(("/", "~/")):
        if not is_token_file_name(reference.rsplit("/", 1)[-1]):
            raise ValueError(TOKEN_FILE_RULE)
        return reference
    raise ValueError("this looks like a secret: write `auth_token: ${env:NAME}` and export NAME where argus "
                     "runs, or give the path of a token file, absolute or ~/... (not relative: that file would "
                     "be in the workspace, in git); the token itself never goes in a spec")


# argus creates directories and writes records under a shared root: never into the system's own.
SYSTEM_TREES = frozenset({"proc", "sys", "dev", "etc", "boot", "usr", "bin", "sbin", "lib", "lib32", "lib64",
                          "libx32"})
"""Top-level directories refused with everything under them."""
BARE_DIRECTORIES = frozenset({"/", "/run", "/var", "/home", "/root", "/mnt", "/opt", "/srv", "/tmp", "/media"})
"""Refused themselves; a directory of their own under them (/mnt/shared, /tmp/x) is fine."""
SHARED_ROOT_RULE = ("a shared root is an absolute path other than / and the system directories (like /mnt/shared), "
                    "or a relative path strictly inside the workspace (like shared)")


def shared_root_problem(shared_root: str) -> str | None:
    """Why `shared_root` cannot be one, judged on its text alone (the loader also resolves symlinks)."""
    if any(ord(c) < 32 or ord(c) == 127 for c in shared_root):
        return "control characters and NUL are not allowed"
    if shared_root.startswith("/"):
        normal = "/" + posixpath.normpath(shared_root).lstrip("/")  # normpath keeps a leading //
        top = "/" + normal.split("/")[1]
        if normal in BARE_DIRECTORIES or top[1:] in SYSTEM_TREES:
            shown = repr(shared_root) if normal == shared_root else f"{shared_root!r} (that is {normal})"
            return f"{shown} is {'a system directory' if normal == top else f'inside {top}, a system directory'}"
        return None
    normal = posixpath.normpath(shared_root)
    if normal == "." or normal == ".." or normal.startswith("../"):
        return f"{shared_root!r} is not inside the workspace"
    return None


MAX_QUOTA_WORKSPACES = 1024
"""Workspaces one Quotas caps: every team of a lab, never a flood a plan has to weigh."""


class Quotas(Spec):
    """How much of each Ray resource each workspace may hold at once on a cluster: reviewed, planned, applied
    and audited like a job, and set only by the cluster's `admin` workspace (docs/queue.md, "Quotas")."""

    kind: Literal["Quotas"]
    cluster: Name
    """The cluster these quotas cap; its `admin` must be the workspace that holds this spec."""
    workspaces: dict[Name, Resources] = Field(default={}, max_length=MAX_QUOTA_WORKSPACES)
    """Workspace name -> the Ray resources it may hold at once, like `llm-rl: {GPU: 8}`; a workspace not
    named here is not capped."""

    @property
    def name(self) -> str:
        """One Quotas per cluster: it is known by its cluster's name (`quotas.CLUSTER`)."""
        return self.cluster

    def digest(self, admin: str) -> str:
        """What the admin's audit chain records when it applies these quotas, and the record on the shared
        root must match (state.queue.applied_quotas): the cluster, the admin and every cap, canonically."""
        body = {"cluster": self.cluster, "admin": admin,
                "workspaces": {team: {r: float(v) for r, v in sorted(caps.items())}
                               for team, caps in sorted(self.workspaces.items())}}
        return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()

    @field_validator("workspaces")
    @classmethod
    def _finite_amounts(cls, workspaces: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        for team, limits in workspaces.items():
            for resource, amount in limits.items():
                if not (0 < len(resource) <= 64 and resource.isprintable()):
                    raise ValueError(f"resource name {resource!r} of workspace {team} must be a printable string "
                                     "of 1 to 64 characters")
                if not amount < MAX_COUNT:  # also refuses NaN and infinity
                    raise ValueError(f"{resource} of workspace {team} must be a finite number below {MAX_COUNT}")
        return workspaces


Resource = Workspace | Cluster | CodeSnapshot | Job | Quotas
KINDS: dict[str, type[Spec]] = {"Workspace": Workspace, "Cluster": Cluster, "CodeSnapshot": CodeSnapshot,
                                "Job": Job, "Quotas": Quotas}
