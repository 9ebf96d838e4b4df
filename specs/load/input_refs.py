"""`${dataset:NAME}` and `${model:NAME}` in jobs, and the rules between inputs and the resources they name.

Pure functions of the specs, as specs/load/after.py is for `${job:...}`: which inputs a job reads (the planner
waits on them as on `after:`), where each reference is, a stand-in for checks made before an input exists,
and the located errors (an unknown name, an input on another cluster, a hub with no endpoint).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from functools import partial

from specs.address import Address
from specs.desired import Source
from specs.diagnostics import Diagnostic
from specs.kinds.inputs import MATERIALISER_PREFIXES, Dataset, Input, Model, materialiser_name, url_problem
from specs.kinds.models import Cluster, CodeSnapshot, Job

REFERENCE = re.compile(r"\$\{(dataset|model):([^}]*)\}")
WELL_FORMED = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
AFTER = re.compile(r"[^\s,'\"\]]*")
"""What follows a reference in the same path (`/train.parquet`): it may not climb out with `..`."""
HUB_ENDPOINT = "HF_ENDPOINT"
KIND = {"dataset": "Dataset", "model": "Model"}


def placeholder(kind: str, name: str) -> str:
    return f"${{{kind}:{name}}}"


def referenced_texts(job: Job) -> Iterator[tuple[str, str]]:
    """(field path, text) of every place an input may be named: model, data, overrides, env, entrypoint."""
    if job.model is not None:
        yield "model", job.model
    for field in ("train", "val"):
        value = getattr(job.data, field) if job.data is not None else None
        if isinstance(value, list):
            yield from ((f"data.{field}.{i}", item) for i, item in enumerate(value))
        elif value is not None:
            yield f"data.{field}", value
    yield from ((f"overrides.{i}", text) for i, text in enumerate(job.overrides))
    yield from ((f"env.{key}", value) for key, value in job.env.items())
    if isinstance(job.entrypoint, str):
        yield "entrypoint", job.entrypoint
    elif job.entrypoint:
        yield from ((f"entrypoint.{i}", arg) for i, arg in enumerate(job.entrypoint))


def references(text: str) -> list[tuple[str, str]]:
    """(kind, name) of each well-formed reference in `text`, `kind` being `dataset` or `model`."""
    if "${" not in text:  # most texts name nothing: asked of every text of every job, twice a plan
        return []
    return [(kind, name) for kind, name in REFERENCE.findall(text) if WELL_FORMED.fullmatch(name)]


def inputs_of(job: Job) -> list[Address]:
    """The inputs a job reads (`dataset.NAME`, `model.NAME`), sorted: it starts only once each is ready."""
    found = {Address.of_spec(KIND[kind], name) for _, text in referenced_texts(job) for kind, name in references(text)}
    return sorted(found)


def fill(text: str, locations: Mapping[Address, str]) -> str:
    """Each reference replaced by where its version lives (`${shared_root}/datasets/NAME/KEY12`)."""
    for kind, name in references(text):
        text = text.replace(placeholder(kind, name), locations[Address.of_spec(KIND[kind], name)])
    return text


def stand_ins(text: str) -> str:
    """Each reference replaced by a path of its shape, for checks made before the input exists (Hydra would
    read `${dataset:...}` as its own interpolation)."""
    for kind, name in references(text):
        text = text.replace(placeholder(kind, name), f"/argus-stand-in/{kind}s/{name}")
    return text


def hub_endpoint(spec: Input, cluster: Cluster) -> str | None:
    """The hub a source is read from: its own `endpoint`, else the cluster's job_defaults HF_ENDPOINT when that
    is a URL (a `${env:...}` one is known only at submit, too late to pin a commit)."""
    if spec.hub is None:
        return None
    if spec.hub.endpoint is not None:
        return spec.hub.endpoint
    default = cluster.job_defaults.env.get(HUB_ENDPOINT)
    return default if default is not None and url_problem(default, ("http", "https")) is None else None


def diagnostics(clusters: Mapping[str, Cluster], snapshots: Mapping[str, CodeSnapshot], jobs: Mapping[str, Job],
                inputs: Mapping[Address, Dataset | Model], sources: Mapping[str, Source]) -> list[Diagnostic]:
    """Every problem of the inputs' own references and of the jobs' references to inputs, located."""
    found = [d for address, spec in sorted(inputs.items())
             for d in _input_diagnostics(spec, clusters, snapshots, partial(_error, address, sources[address]))]
    for name, job in sorted(jobs.items()):
        at = partial(_error, Address.job(name), sources[Address.job(name)])
        found += [d for path, text in referenced_texts(job)
                  for d in _reference_diagnostics(job, path, text, inputs, at)]
    return found


def reserved_names(jobs: Mapping[str, Job], inputs: Mapping[Address, Dataset | Model],
                   sources: Mapping[str, Source]) -> list[Diagnostic]:
    """Job names argus keeps for its materialisation runs, and input names too long to make one: a user's job
    named `dataset--gsm8k` would be taken for the runs that fetch dataset.gsm8k (and stop them)."""
    found = [_error(Address.job(name), sources[Address.job(name)], "name",
                    f"job name {name!r} starts with {name.split('--')[0]}--, which argus keeps for the runs that "
                    "fetch or prepare Datasets and Models", "rename the job")
             for name in sorted(jobs) if name.startswith(MATERIALISER_PREFIXES)]
    found += [_error(address, sources[address], "name",
                     f"{spec.kind} name {spec.name!r} is too long: argus runs its materialisation as the job "
                     f"{materialiser_name(spec)!r}, and a job name has at most 63 characters",
                     f"shorten it to at most {63 - len(materialiser_name(spec)) + len(spec.name)} characters")
              for address, spec in sorted(inputs.items()) if len(materialiser_name(spec)) > 63]
    return found


def _input_diagnostics(spec: Dataset | Model, clusters: Mapping[str, Cluster], snapshots: Mapping[str, CodeSnapshot],
                       at: partial[Diagnostic]) -> list[Diagnostic]:
    if spec.cluster not in clusters:
        return [at("cluster", f"no Cluster named {spec.cluster!r} (known: {_known(clusters)})")]
    if spec.hub is not None and hub_endpoint(spec, clusters[spec.cluster]) is None:
        return [at("hub", f"no hub endpoint: cluster {spec.cluster!r} sets no {HUB_ENDPOINT} URL in job_defaults.env",
                   "give `hub.endpoint: https://huggingface.co` (or your mirror's URL)")]
    code = spec.prepare.code if spec.prepare is not None else None
    for i, arg in enumerate(spec.prepare.entrypoint if spec.prepare is not None else ()):
        for match in REFERENCE.finditer(arg):  # never filled nor waited for here: the program would get the text
            return [at(f"prepare.entrypoint.{i}", f"`{match.group()}`: a prepare step's entrypoint is not filled "
                                                   "with an input's version (nor does it wait for one)",
                       "give the path the program reads (a `path:` source's directory), or prepare it in one step")]
    if code is not None and code not in snapshots:
        return [at("prepare.code", f"no CodeSnapshot named {code!r} (known: {_known(snapshots)})")]
    if code is not None and snapshots[code].cluster != spec.cluster:
        return [at("prepare.code", f"CodeSnapshot {code!r} lives on cluster {snapshots[code].cluster!r}, not on "
                                   f"{spec.cluster!r}: snapshot the code on the input's cluster")]
    return []


def _reference_diagnostics(job: Job, path: str, text: str, inputs: Mapping[Address, Dataset | Model],
                           at: partial[Diagnostic]) -> list[Diagnostic]:
    found = []
    for match in REFERENCE.finditer(text):
        kind, name = match.groups()
        if not WELL_FORMED.fullmatch(name):
            found.append(at(path, f"`{match.group()}` is not a reference argus knows",
                            f"write `${{{kind}:NAME}}`, NAME a {KIND[kind]}'s name"))
            continue
        spec = inputs.get(Address.of_spec(KIND[kind], name))
        if spec is None:
            known = _known({a.name: s for a, s in inputs.items() if s.kind == KIND[kind]})
            found.append(at(path, f"`{match.group()}`: no {KIND[kind]} named {name!r} (known: {known})"))
        elif spec.cluster != job.cluster:
            found.append(at(path, f"`{match.group()}` lives on cluster {spec.cluster!r}, not on the job's "
                                  f"{job.cluster!r}: its nodes may not see that shared root",
                            f"declare the {KIND[kind]} on cluster {job.cluster!r} too"))
        elif ".." in AFTER.match(text, match.end()).group().split("/"):  # type: ignore[union-attr]
            found.append(at(path, f"`{match.group()}` is followed by '..': name a file inside the {KIND[kind]}"))
    return found


def _known(named: Mapping[str, object]) -> str:
    return ", ".join(sorted(named)) or "none defined"


def _error(address: str, source: Source, field: str, message: str, hint: str | None = None) -> Diagnostic:
    return Diagnostic(severity="error", address=address, field=field, message=message, hint=hint).located(source)
