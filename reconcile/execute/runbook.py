"""The run book: argus's records of this workspace's runs while one apply runs.

It starts from the records the plan's observation read and keeps every record apply writes, so
bringing the records up to date after apply needs no second observation (execute.refresh).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from reconcile.model import SubmitStep
from reconcile.plan import demand_label
from reconcile.plan.demand import gpus
from reconcile.plan.queue import ask_demand
from reconcile.plan.runs import outran_ray
from specs.desired import DesiredState
from specs.errors import ArgusError
from specs.kinds.inputs import materialiser_name
from specs.kinds.models import Job, Spec
from specs.workloads.submission import RunId, labels
from state.observed import ClusterState, RunRecord, RunStatus
from state.ray.client import ClusterUnreachable
from state.root import outputs as output_marks
from state.root.outputs import checkpoint_path
from state.runs import debug, records
from state.runs import index as run_index


class RunBook:
    """Writes each run's record and files on its cluster's shared root, and remembers what it wrote."""

    def __init__(self, desired: DesiredState, known: Mapping[str, RunRecord], clusters: Mapping[str, ClusterState],
                 plan_id: str, commit: str, redact: Callable[[str], str] = str) -> None:
        self._desired = desired
        self._known = dict(known)
        self._clusters = clusters
        """The clusters as observed before apply: each submit's ray_status_pre.txt comes from here."""
        self._plan_id, self._commit = plan_id, commit
        self._redact = redact
        self._status_texts: dict[str, str] = {}
        self._cluster_texts: dict[str, str] = {}
        self.submitted: list[RunRecord] = []
        """Runs Ray accepted during this apply, in the order Ray accepted them. Concurrent submits
        (execute.batch) share this book: each touches only its own run's entries and files, and
        CPython's dict and list updates are atomic."""

    def get(self, submission_id: str) -> RunRecord | None:
        """The run's record: as observed, or as this apply last wrote it."""
        return self._known.get(submission_id)

    def known(self) -> list[RunRecord]:
        """Every record the plan's observation read or this apply wrote (a bounded set: state.runs.index)."""
        return list(self._known.values())

    def labels(self, step: SubmitStep) -> dict[str, str]:
        """The metadata stamped on the Ray job: which run it is, which commit and plan sent it, and the demand
        admitted for it (every workspace reads it from Ray's table: reconcile.plan.holdings)."""
        demand = demand_label.stamped(step.ask.bundles, step.ask.driver, step.ask.spread) if step.ask else {}
        return {**labels(_run_of(step), self._commit, self._plan_id), **demand}

    def open(self, step: SubmitStep, payload: dict[str, Any]) -> RunRecord:
        """Before the submit: configs, payload (secrets as references) and status SUBMITTING on NFS."""
        sub, root = step.submission, self._root(step.cluster)
        job, spec = self._spec_of(sub.job)
        record = RunRecord.submitting(_run_of(step), sub, updated_at=records.now(), plan_id=self._plan_id,
                                      commit=self._commit, protect=job.protect if job is not None else False,
                                      session_name=self._session(step.cluster), gpus=_demanded_gpus(step),
                                      bindings=dict(step.bindings),
                                      outputs=None if step.legacy_outputs else "workspace")
        configs = {"ray_config": self._cluster_yaml(step.cluster),
                   "jobspec": records.config_yaml(spec.model_dump(mode="json"))}
        self._never_unseen(root, step.submission_id)
        if job is not None:  # a materialisation run writes its input's staging directory, no checkpoints
            output_marks.mark(root, checkpoint_path(self._desired, job, step.legacy_outputs), sub.workspace, job.name)
        run_index.mark_open(root, sub.workspace, step.submission_id)
        records.write_intent(root, record, configs, {"submission_id": step.submission_id, **payload})
        if step.submission_id in self._known:  # sent again (refused before): a racing plan may have unmarked it
            run_index.reopened(root, sub.workspace, step.submission_id)
        if step.cluster in self._clusters:
            records.write_debug(root, step.submission_id, "ray_status_pre.txt", self._status_text(step.cluster))
        self._known[record.submission_id] = record
        return record

    def _spec_of(self, name: str) -> tuple[Job | None, Spec]:
        """The job a run is of, or for a materialisation run (`dataset--NAME`) None and the input it makes."""
        if name in self._desired.jobs:
            return self._desired.jobs[name], self._desired.jobs[name]
        made = [s for s in self._desired.inputs.values() if materialiser_name(s) == name]
        if not made:
            raise ArgusError(f"{name} is neither a job nor an input's materialisation in the desired state; "
                             "run `argus plan` again")
        return None, made[0]

    def refused(self, record: RunRecord, err: ArgusError) -> None:
        """SUBMIT_FAILED when Ray refused the submit; SUBMITTING when the request was lost on the way,
        since Ray may have accepted it (the next observation tells)."""
        status = RunStatus.SUBMITTING if isinstance(err, ClusterUnreachable) else RunStatus.SUBMIT_FAILED
        self.update(record, status=status, error=self._redact(str(err)))
        self.note(record, f"submit failed: {err}")

    def accepted(self, record: RunRecord, note: str) -> None:
        stamp = records.now()
        self.submitted.append(self.update(record, status=RunStatus.PENDING, submitted_at=stamp, updated_at=stamp))
        self.note(record, note)

    def update(self, record: RunRecord, **changes: Any) -> RunRecord:
        """Write the record with these fields changed (and a fresh updated_at), and remember it."""
        changed = record.model_copy(update={"updated_at": records.now(), **changes})
        records.write_status(self._root(record.cluster), changed)
        self._known[changed.submission_id] = changed
        return changed

    def note(self, record: RunRecord, text: str) -> None:
        records.append_submit_log(self._root(record.cluster), record.submission_id, self._redact(text))

    def _never_unseen(self, root: str, submission_id: str) -> None:
        """A record of this very run that the plan did not see (its run index edited or removed, or an
        argus of an earlier version wrote it): submitting would run it a second time once Ray forgot it.
        The index is dropped, so the next plan reads every record and sees it (state.runs.index)."""
        seen, on_disk = self._known.get(submission_id), records.read_record(root, submission_id)
        # a run sent again (refused, or never reached Ray) only when its record still says so: an index
        # entry saying refused of a run whose record says it ran must not send it twice
        if on_disk is None or (seen is not None and seen.status == on_disk.status):
            return
        if outran_ray(on_disk, self._clusters) is not None:  # no run: a record a job wrote ahead of it
            self.note(on_disk, f"a record no run of Ray's backs was found here and replaced ({on_disk.status})")
            return
        run_index.forget_index(root, self._desired.workspace.name)
        raise ArgusError(f"run {submission_id} already has a record ({records.job_dir(root, submission_id)}) that "
                         "this plan did not see (or saw saying otherwise): its run index was edited or removed. "
                         "Nothing was submitted; run `argus plan` again (it reads every record this time)")

    def _root(self, cluster: str) -> str:
        return self._desired.shared_root(cluster)

    def _cluster_yaml(self, cluster: str) -> str:
        """The cluster's spec as each of its runs keeps it, rendered once: every submit to it keeps the same text."""
        if cluster not in self._cluster_texts:
            self._cluster_texts[cluster] = records.config_yaml(self._desired.clusters[cluster].model_dump(mode="json"))
        return self._cluster_texts[cluster]

    def _status_text(self, cluster: str) -> str:
        """The cluster as observed before apply, rendered once: every submit to it keeps the same text."""
        if cluster not in self._status_texts:
            self._status_texts[cluster] = debug.cluster_status(self._clusters[cluster])
        return self._status_texts[cluster]

    def _session(self, cluster: str) -> str | None:
        observed = self._clusters.get(cluster)
        return observed.session_name if observed else None


def _run_of(step: SubmitStep) -> RunId:
    sub = step.submission
    return RunId(workspace=sub.workspace, job=sub.job, spec_hash=step.spec_hash, attempt=step.attempt)


def _demanded_gpus(step: SubmitStep) -> float | None:
    """The GPUs of the run's whole demand, when it has one (what `argus usage` counts)."""
    return None if step.ask is None else gpus(ask_demand(step.ask))
