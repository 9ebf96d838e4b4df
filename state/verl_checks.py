"""Plan-time checks of verl jobs that read files: entry module, Hydra composition, data, model.

Hydra composes the job's overrides against the snapshot's own verl/trainer/config (no torch, no
verl import). A typo'd key fails there, in the pull request, not after the cluster has started.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path

from specs import verl
from specs.address import Address
from specs.desired import DesiredState
from specs.diagnostics import Diagnostic, Severity
from specs.models import Job
from specs.submission import expand
from state.files import write_json
from state.observed import SnapshotState
from state.sources import entries

CONFIG_DIR = "verl/trainer/config"
FAKE_ID = "SUBMISSION_ID"


def check_job(desired: DesiredState, job: Job, snapshot: SnapshotState, cache_root: str,
              files: bool = True) -> tuple[Diagnostic, ...]:
    """Everything that can be known about a verl job before it takes a GPU, located in its spec."""
    code = _code_files(desired, job, snapshot, cache_root)
    if code is None:
        return ()  # the snapshot's own errors already explain why
    found = []
    if not (code / verl.module_path(job.workload)).is_file():
        found.append(_about(job, "workload", f"entry module {verl.WORKLOADS[job.workload].module} is not in "
                                             f"code.{job.code} (an older verl?): pick a snapshot that has "
                                             f"{verl.module_path(job.workload)}"))
    elif rejected := compose(code / CONFIG_DIR, job, desired, cache_root, snapshot.source.digest or ""):
        found.append(rejected)
    found += _file_diagnostics(desired, job) if files else []
    source = desired.source(Address.job(job.name))
    return tuple(d.located(source) for d in found)


def compose(config_dir: Path, job: Job, desired: DesiredState, cache_root: str, digest: str) -> Diagnostic | None:
    """Compose the job's config with Hydra; cached on disk by (config digest, overrides)."""
    root = desired.shared_root(job.cluster)
    overrides = [expand(a, root, FAKE_ID) for a in verl.argv(job, desired.workspace.name)[3:]]
    name = verl.WORKLOADS[job.workload].config
    key = hashlib.sha256(json.dumps([digest, name, overrides, _hydra_version()]).encode()).hexdigest()
    cache = Path(cache_root) / ".argus" / "hydra-checks" / f"{key}.json"
    if digest and cache.exists():  # verdicts are cached only for configs that passed the scan below
        error = json.loads(cache.read_text())["error"]
    elif _extends_search_path(config_dir):
        return _about(job, "code", f"code.{job.code}'s Hydra config sets hydra.searchpath, which can load modules "
                                   "or files from anywhere: argus does not compose it")
    else:
        error, final = _compose_error(config_dir, name, overrides)
        if digest and final:
            write_json(cache, {"error": error})
    return None if error is None else _about(job, _blamed_field(job, error), f"Hydra rejects the job's config: {error}")


def _extends_search_path(config_dir: Path) -> bool:
    """verl's configs never set it; a source that does could make composing import any installed module."""
    return any(b"searchpath" in path.read_bytes() for path in config_dir.rglob("*.yaml")
               if path.is_file() and not path.is_symlink())


def _compose_error(config_dir: Path, name: str, overrides: list[str]) -> tuple[str | None, bool]:
    """(error, final): Hydra's and OmegaConf's verdicts are final and cached; other failures are not."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir), version_base=None):
            hydra_compose(config_name=name, overrides=overrides, return_hydra_config=True)
    except (HydraException, OmegaConfBaseException) as err:
        return " ".join(str(err).split())[:500] or type(err).__name__, True
    except Exception as err:  # noqa: BLE001 - reported, but not remembered as the config's fault
        return f"{type(err).__name__}: {err}", False
    finally:
        GlobalHydra.instance().clear()
    return None, True


def _blamed_field(job: Job, error: str) -> str:
    """The user's override Hydra cannot parse, or whose key or value the error names."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    parser = OverridesParser.create()
    for index, override in enumerate(job.overrides):
        try:
            parser.parse_overrides([override])
        except HydraException:
            return f"overrides.{index}"
    for index, override in enumerate(job.overrides):
        key, _, value = override.partition("=")
        if f"'{verl.override_key(override)}'" in error or (value and f"/{value}'" in error):
            return f"overrides.{index}"
    return "overrides" if job.overrides else "workload"


def _about(job: Job, field: str, message: str, severity: Severity = "error") -> Diagnostic:
    return Diagnostic(severity=severity, address=Address.job(job.name), field=field, message=message)


def _hydra_version() -> str:
    from importlib.metadata import version

    return version("hydra-core")


def _code_files(desired: DesiredState, job: Job, snapshot: SnapshotState, cache_root: str) -> Path | None:
    """The snapshot on disk, or (not made yet) its verl files read from the source's git objects."""
    spec = desired.snapshots[job.code or ""]
    if snapshot.manifest is not None:
        return Path(desired.snapshot_dir(spec))
    source = snapshot.source
    if source.error or not source.digest:
        return None
    extracted = Path(cache_root) / ".argus" / "verl-code" / source.digest
    if not extracted.exists():
        extracted.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{source.digest}.", dir=extracted.parent))
        for rel, _mode, data in entries(spec, source, desired.root, cache_root):
            if rel.startswith(CONFIG_DIR + "/") or rel.startswith("verl/trainer/") and rel.endswith(".py"):
                (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
                (tmp / rel).write_bytes(data)
        tmp.rename(extracted)
    return extracted


def _file_diagnostics(desired: DesiredState, job: Job) -> list[Diagnostic]:
    root = desired.shared_root(job.cluster)
    found = []
    assert job.data is not None and job.model is not None
    for field, value in (("data.train", job.data.train), ("data.val", job.data.val)):
        if value and not Path(expand(value, root)).exists():
            found.append(_about(job, field, f"{expand(value, root)} does not exist on the shared filesystem"))
    model = expand(job.model, root)
    if model.startswith("/"):
        if not Path(model).exists():
            found.append(_about(job, "model", f"model path {model} does not exist"))
    elif not (Path(root) / "hf" / "hub" / f"models--{model.replace('/', '--')}").is_dir():
        found.append(_about(job, "model", f"{model} is only a hub id and is not cached under {root}/hf: the cluster "
                                          f"has no internet; download it there first (HF_HOME={root}/hf)",
                            severity="warning"))
    return found


def offline_checks(desired: DesiredState, cache_root: str,
                   fetch_timeout: float | None = None) -> dict[str, tuple[Diagnostic, ...]]:
    """`argus validate --deep`: what needs only the code, not the cluster or its files.

    Keyed by address: code.NAME for a source that does not resolve, job.NAME for the job's checks.
    """
    from state.observed import SnapshotState
    from state.sources import DEFAULT_FETCH_TIMEOUT, resolve_source

    used = {job.code for job in desired.jobs.values() if job.workload != "command" and job.code}
    sources = {name: resolve_source(desired.snapshots[name], desired.root, cache_root,
                                    fetch_timeout or DEFAULT_FETCH_TIMEOUT) for name in sorted(used)}
    found: dict[str, tuple[Diagnostic, ...]] = {
        s.error.address: (s.error.located(desired.source(s.error.address)),) for s in sources.values() if s.error}
    for name, job in sorted(desired.jobs.items()):
        if job.code in sources and not sources[job.code].error:
            found[Address.job(name)] = check_job(desired, job, SnapshotState(source=sources[job.code]), cache_root,
                                                 files=False)
    return found
