"""The Ray adapter: Ray's Jobs REST API (state.ray.jobs_api) at a fixed address, with timeouts and clear errors."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

from specs.diagnostics import plain
from specs.errors import ArgusError
from specs.workloads.submission import parse_labels
from state.observed import TERMINAL, ClusterState, Node, RayJob
from state.ray import holds as held
from state.ray.answers import WrongAnswer
from state.ray.deadline import AnswerTooLarge, Budget
from state.ray.gpus import driver_pid
from state.ray.jobs_api import AuthRefused, JobsApi, MalformedAnswer
from state.ray.transport import Transport, certificate_message, certificate_problem
from state.ray.versions import version_warning

DEFAULT_TIMEOUT = 10.0
PROGRESS_EVERY = 5.0
"""Seconds between progress lines of a long wait: plain lines, so logs of CI runs show them too."""
READ_RETRY_DELAYS = (0.5, 1.0)
"""Backoff between tries of a read: up to three tries, while the command's budget for the dashboard lasts."""


class ClusterUnreachable(ArgusError):
    """The dashboard did not answer: down, wrong address, or a network problem."""


class ClusterRequestFailed(ArgusError):
    """The dashboard answered with an error."""

    def __init__(self, message: str, detail: str = "", status: int = 0, malformed: bool = False):
        super().__init__(message)
        self.detail = detail
        self.status = status
        """The HTTP status the dashboard answered; 0 when there was none (argus refused, or no answer)."""
        self.malformed = malformed
        """The answer came, but in a shape argus cannot read (not a list, rows that are not objects)."""


class ClusterAuthFailed(ArgusError):
    """The dashboard wants a token (RAY_AUTH_MODE=token) and got none, or refused the one argus sent.
    Never retried: the next try would send the same header."""


class ClusterTlsFailed(ClusterRequestFailed):
    """The TLS handshake with the dashboard failed (an untrusted certificate, a refused client certificate):
    its own message, never "Is the head running?", and never retried (the next try would fail the same)."""


class ClusterAnswerUnclear(ClusterUnreachable, ClusterRequestFailed):
    """A submit, stop or delete answered 200 in a shape Ray never sends (state.ray.answers): whether Ray did it
    is unknown. An error, never success; and, like an answer lost on the way, a submit's run stays SUBMITTING
    with its secrets and admission kept (reconcile.execute.ray_steps), since Ray may have it: the next plan
    finds it in Ray's table, or not."""


class SubmitConflict(ArgusError):
    """The submission id exists on the cluster but belongs to another spec."""


class RayClient:
    """One Ray cluster, reached only at the address its spec names."""

    def __init__(self, name: str, address: str, timeout: float = DEFAULT_TIMEOUT, token: str | None = None,
                 transport: Transport | None = None):
        """`token`: the cluster's own dashboard token (state.ray.auth reads it), sent on every request;
        without one no Authorization header is sent, whatever this process's RAY_AUTH_* variables say."""
        self.name = name
        self.address = address.rstrip("/")
        self.timeout = timeout
        self._sends_token = token is not None
        self.budget = Budget(timeout)
        """The command's one deadline for this dashboard: failed tries and the backoff between them take
        `timeout` seconds in all, across every request and retry (a client is built once per command)."""
        self.transport = transport or Transport()
        """TLS, proxy, the token's header and extra headers (state.ray.transport reads them from the spec)."""
        self._api = _make_api(self.address, timeout, token, self.transport)
        self._api.budget = self.budget  # a read waits no longer than what is left of it

    def snapshot(self) -> ClusterState:
        """Version, alive nodes and every submission job: one list_jobs for the whole plan."""
        version = self._read(self._version)
        rows = self.node_rows()
        jobs = self.jobs()
        return ClusterState(
            name=self.name,
            address=self.address,
            session_name=_text(version.get("session_name")),
            ray_version=_text(version.get("ray_version")),
            nodes=with_usage(self.alive_nodes(rows), self.usage_by_node()),
            dead_nodes=sum(r.get("state") == "DEAD" for r in rows),
            jobs=jobs,
            version_warning=version_warning(version),
            **self.holds(jobs),
        )

    def version(self) -> dict[str, Any]:
        """The head's GET /api/version: its Ray version, Jobs API version and session name."""
        return self._read(self._version)

    def jobs(self) -> tuple[RayJob, ...]:
        """Every submission job on the cluster, and nothing else: one list_jobs."""
        details = self._read(self._list_jobs)
        with self._errors("list jobs"):
            return tuple(job for d in details if d.get("type") == "SUBMISSION" and (job := _ray_job(d)) is not None)

    def _list_jobs(self) -> list[dict[str, Any]]:
        with self._errors("list jobs"):
            return self._api.list_jobs()

    def _version(self) -> dict[str, Any]:
        with self._errors("GET /api/version"):
            return self._api.version()

    def node_rows(self) -> list[dict[str, Any]]:
        endpoint = "/api/v0/nodes?limit=10000&detail=true"
        rows = _dig(self._get_json(endpoint), "data", "result", "result")
        if not (isinstance(rows, list) and all(isinstance(r, dict) for r in rows)):
            raise self._malformed(f"GET {endpoint}", "its data.result.result is not a list of node objects")
        return rows

    def alive_nodes(self, rows: list[dict[str, Any]] | None = None) -> tuple[Node, ...]:
        rows = self.node_rows() if rows is None else rows
        return tuple(node for r in rows if r.get("state") == "ALIVE" and (node := _node(r)) is not None)

    def admission_view(self) -> ClusterState:
        """What admission decides from: alive nodes with their use, the job table and what Ray holds for
        each job (no version)."""
        jobs = self.jobs()
        return ClusterState(name=self.name, address=self.address, session_name="", ray_version="",
                            nodes=with_usage(self.alive_nodes(), self.usage_by_node()), jobs=jobs, **self.holds(jobs))

    def holds(self, jobs: tuple[RayJob, ...]) -> dict[str, Any]:
        """ClusterState's `holds` and `holds_problem`: what Ray holds for each active job (state.ray.holds),
        two reads of the state API whatever the number of jobs. A state API that fails or answers in
        another shape is said, never the cluster's end: each run's known demand is then counted instead."""
        if not any(j.status in ("PENDING", "RUNNING") for j in jobs):
            return {}
        try:
            groups, actors = (held.listing(self._get_json(endpoint)) for endpoint in (held.GROUPS, held.ACTORS))
        except (ClusterRequestFailed, ClusterUnreachable) as err:
            return {"holds_problem": plain(str(err))[:400]}
        if groups is None or actors is None:
            return {"holds_problem": "the state API answered in a shape argus cannot read"}
        partial = "" if groups.complete and actors.complete else \
            f"the state API listed only part of the placement groups or actors (argus reads {held.MAX_ROWS})"
        return {"holds": held.holds_by_run(jobs, groups.rows, actors.rows), "holds_problem": partial}

    def usage_by_node(self) -> dict[str, dict[str, Any]]:
        """What each node uses now, from the autoscaler's report (`ray status`): {} when the cluster
        has none (no monitor), so admission then counts only what argus itself admitted."""
        try:
            body = self._get_json("/api/cluster_status")
        except ClusterRequestFailed as err:
            if err.status < 400:  # an answer too large or unreadable, not "no report here"
                raise
            return {}
        report = _dig(body, "data", "clusterStatus")
        if report is None:  # no autoscaler report: nothing said, nothing misread
            return {}
        usage = _dig(report, "loadMetricsReport", "usageByNode")
        if not isinstance(usage, dict):  # a report there but unreadable: the nodes' use is not known
            raise self._malformed("GET /api/cluster_status", "its clusterStatus holds no usageByNode object")
        return usage

    def job_statuses(self) -> dict[str, str]:
        """Each job's id and status, from one GET /api/jobs/ that is not retried: `argus serve`'s watch
        (reconcile.serve.watch) asks again a moment later. Rows without an id, or whose status is not one
        of Ray's, are left out: the watch only compares statuses, it never acts on a row."""
        with self._errors("list jobs"):
            rows = self._api.list_jobs()
        found = {}
        for row in rows:
            job_id, status = _text(row.get("submission_id")) or _text(row.get("job_id")), _text(row.get("status"))
            if job_id and status in RAY_STATUSES:
                found[job_id] = status
        return found

    def resources_in_use(self) -> dict[str, float]:
        """What the whole cluster uses now by resource, summed over nodes (the report's camel-cased
        names: workerNode for worker_node), from one GET /api/cluster_status that is not retried."""
        with self._errors("GET /api/cluster_status"):
            body = self._api.get_json("/api/cluster_status")
        usage = _dig(body, "data", "clusterStatus", "loadMetricsReport", "usageByNode")
        totals: dict[str, float] = {}
        for report in usage.values() if isinstance(usage, dict) else ():
            for name, pair in report.items() if isinstance(report, dict) else ():
                amount = _amount(pair[0]) if isinstance(pair, list) and pair else None
                if amount is not None and amount >= 0:
                    totals[str(name)] = totals.get(str(name), 0.0) + amount
        return totals

    def submit(self, submission_id: str, payload: dict[str, Any]) -> str:
        """Ray's atomic create-if-absent. Returns "submitted", or "exists" when it is already ours."""
        try:
            with self._errors(f"submit {submission_id}"):
                self._api.submit({"submission_id": submission_id, **payload})
            return "submitted"
        except ClusterRequestFailed as err:
            if "already exists" not in err.detail:
                raise
        existing = self.job(submission_id)
        ours = parse_labels(payload["metadata"])
        if existing is not None and ours is not None and existing.run_id == ours:
            return "exists"
        raise SubmitConflict(
            f"Job {submission_id} already exists on cluster {self.name!r} with another spec "
            f"(argus.spec_hash={existing.spec_hash if existing else '?'}); argus will not touch it. "
            f"Rename the job or bump its `run:` counter."
        )

    def job(self, submission_id: str) -> RayJob | None:
        try:
            with self._errors(f"read job {submission_id}"):
                return _ray_job(self._api.job_info(submission_id))
        except ClusterRequestFailed as err:
            if err.status == 404:  # Ray's "Job ... does not exist"
                return None
            raise

    def stop(self, submission_id: str) -> None:
        with self._errors(f"stop {submission_id}"):
            self._api.stop(submission_id)

    def wait_terminal(self, submission_id: str, timeout: float, poll: float = 0.25,
                      progress: Callable[[str], None] | None = None) -> RayJob | None:
        """Poll until the job is terminal (or gone); raise a clear error when it takes too long."""
        start = time.monotonic()
        deadline, next_note = start + timeout, start + PROGRESS_EVERY
        while True:
            job = self.job(submission_id)
            if job is None or job.status in TERMINAL:
                return job
            if time.monotonic() >= deadline:
                raise ArgusError(
                    f"Job {submission_id} on cluster {self.name!r} is still {job.status} "
                    f"{timeout:.0f}s after the stop request. Ray stops a PENDING job only once it "
                    f"starts (or fails it after RAY_JOB_START_TIMEOUT_SECONDS). Check "
                    f"`argus status`, then run `argus apply` again."
                )
            if progress and time.monotonic() >= next_note:
                progress(f"  still {job.status} after {time.monotonic() - start:.0f}s; waiting up to {timeout:.0f}s")
                next_note += PROGRESS_EVERY
            time.sleep(poll)

    def delete(self, submission_id: str) -> None:
        """Remove a finished job from Ray's table (its record and log are kept on NFS)."""
        with self._errors(f"delete {submission_id}"):
            self._api.delete(submission_id)

    def follow(self, submission_id: str, write: Callable[[str], None]) -> None:
        """Stream the driver log until the job ends (Ray's websocket tail)."""
        import asyncio

        import aiohttp

        async def tail() -> None:
            async for chunk in self._api.tail(submission_id):
                write(chunk)

        with self._errors(f"follow the logs of {submission_id}"):
            try:
                asyncio.run(tail())
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as err:
                if (problem := certificate_problem(err)) is not None:
                    raise ClusterTlsFailed(certificate_message(self.name, self.address, problem)) from None
                raise self._unreachable(f"follow the logs of {submission_id}") from err

    def read_once(self, endpoint: str) -> Any:
        """One GET, never retried (the serve loop's cheap reads: the next turn asks again); errors as all others."""
        with self._errors(f"GET {endpoint}"):
            return self._api.get_json(endpoint)

    def logs(self, submission_id: str) -> str:
        with self._errors(f"read logs of {submission_id}"):
            return self._api.logs(submission_id)

    def read_json(self, endpoint: str) -> Any:
        """One GET of the dashboard answered in JSON, retried like every read (state.ray.scene's reads)."""
        return self._get_json(endpoint)

    def read_text(self, endpoint: str) -> str:
        """One GET answered in text (the reporter's stack dump), not retried: a dump is not worth a second wait."""
        with self._errors(f"GET {endpoint}"):
            return self._api.get_text(endpoint)

    def _get_json(self, endpoint: str) -> dict[str, Any]:
        def get() -> dict[str, Any]:
            with self._errors(f"GET {endpoint}"):
                return self._api.get_json(endpoint)

        return self._read(get)

    def _read(self, call: Callable[[], Any]) -> Any:
        """Reads are retried on a transient failure (bounded backoff); writes never are. Every failed try
        and every wait is spent from the command's budget for this dashboard, and a retry is made only
        while it lasts: a dashboard failing twice per request costs one deadline, not one per request."""
        for delay in (*READ_RETRY_DELAYS, None):
            if self.budget.left() <= 0:
                raise self._out_of_time()
            try:
                with self.budget.charged_on_failure():
                    return call()
            except ClusterUnreachable:
                if delay is None or self.budget.left() <= delay:
                    raise
                time.sleep(delay)
                self.budget.spend(delay)
        raise AssertionError("unreachable: the last try returns or raises")

    def _out_of_time(self) -> ClusterUnreachable:
        return ClusterUnreachable(
            f"Ray dashboard of cluster {self.name!r} at {self.address} failed for {self.timeout:g}s in all during "
            f"this command (--timeout bounds the whole command's failed requests and retries against one "
            f"dashboard), so argus reads no more of it now. Check it with `ray status` on the head."
        )

    def _malformed(self, what: str, why: str) -> ClusterRequestFailed:
        return ClusterRequestFailed(f"Ray cluster {self.name!r} at {self.address} gave an answer argus cannot read "
                                    f"to {what}: {why}. argus uses none of it: the cluster counts as not read.",
                                    malformed=True)

    @contextlib.contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        """Translate requests' and the dashboard's errors into messages naming the cluster and what to try."""
        import requests

        try:
            yield
        except MalformedAnswer as err:
            raise self._malformed(what, str(err)) from None
        except WrongAnswer as err:
            raise ClusterAnswerUnclear(f"Ray cluster {self.name!r} at {self.address}: {err}. argus takes the "
                                       f"request ({what}) as not done; is the address the cluster's Ray dashboard?",
                                       malformed=True) from None
        except AnswerTooLarge as err:
            raise ClusterRequestFailed(
                f"Ray cluster {self.name!r} at {self.address} gave an answer too large to {what}: more than "
                f"{err.limit // 2**20} MiB, the most argus reads of one answer; nothing of it was used. Is the "
                f"address a Ray dashboard, and its job table pruned (`keep_finished`)?"
            ) from None
        except AuthRefused as err:
            raise self._auth_failed(err.status, what) from None
        except requests.Timeout as err:
            raise ClusterUnreachable(
                f"Ray dashboard of cluster {self.name!r} at {self.address} did not answer within "
                f"{self.timeout:g}s ({what}; --timeout bounds each request and, together, the command's failed "
                f"ones). The head may be overloaded; try again, or check it with `ray status` on the head."
            ) from err
        except (requests.ConnectionError, ConnectionError) as err:
            if (problem := certificate_problem(err)) is not None:
                raise ClusterTlsFailed(certificate_message(self.name, self.address, problem)) from None
            raise self._unreachable(what) from err
        except (RuntimeError, ValueError) as err:  # an error status, or a body that is not JSON
            raise ClusterRequestFailed(
                f"Ray cluster {self.name!r} at {self.address} refused to {what}: {_summary(err)}",
                detail=plain(str(err)), status=getattr(err, "status", 0),
            ) from err
        except requests.RequestException as err:  # a body cut short, a redirect loop...
            raise ClusterRequestFailed(
                f"Ray cluster {self.name!r} at {self.address} gave no usable answer to {what}: {type(err).__name__}",
            ) from err

    def _unreachable(self, what: str) -> ClusterUnreachable:
        return ClusterUnreachable(
            f"Cannot reach the Ray dashboard of cluster {self.name!r} at {self.address} "
            f"({what}). Is the head running (`ray status` on the head, or `argus local up` "
            f"for the local cluster) and is the cluster's `address:` right?{_tls_hint(self.address)}"
        )


    def _auth_failed(self, status: int, what: str) -> ClusterAuthFailed:
        """One message, naming the cluster and the fix; Ray's own text (and so any token) is left out."""
        where = f"Cluster {self.name!r} at {self.address}"
        if status == 401 and not self._sends_token:
            return ClusterAuthFailed(
                f"{where}: the dashboard requires a token (RAY_AUTH_MODE=token) and the cluster's spec names "
                f"none ({what}). Set `auth_token: ${{env:NAME}}` in its spec and export NAME with the "
                f"cluster's token (`ray get-auth-token` on the head prints it), or give a token file: "
                f"`auth_token: /path/to/token`."
            )
        if status == 401:
            return ClusterAuthFailed(
                f"{where}: the dashboard answered that no token arrived, though argus sent the one its "
                f"auth_token names ({what}). A proxy in between may drop the {self.transport.auth_header} header: "
                f"behind one that strips Authorization, set `auth_header: X-Ray-Authorization` in its spec."
            )
        return ClusterAuthFailed(
            f"{where}: the dashboard rejected the token that the cluster's auth_token names ({what}). Check "
            f"that it is this cluster's token (`ray get-auth-token` on the head prints it); a cluster "
            f"started again may have a new one."
        )


def _tls_hint(address: str) -> str:
    """Over TLS 1.3 a dashboard that wants a client certificate just closes the connection: said as a possibility."""
    return (" Over https, a dashboard (or its proxy) that wants a client certificate closes the connection too: "
            "check the cluster's tls.client_cert and tls.client_key.") if address.startswith("https:") else ""


def _make_api(address: str, timeout: float, token: str | None, transport: Transport) -> JobsApi:
    """The dashboard's job endpoints at `address` alone, with exactly the token's header or none: the
    cluster's own token (state.ray.auth reads it), never this process's RAY_AUTH_TOKEN or
    ~/.ray/auth_token, since one cluster's token must not travel to another."""
    headers = {} if token is None else {transport.auth_header: f"Bearer {token}"}
    return JobsApi(address, timeout, headers, transport=transport)


RAY_STATUSES = ("PENDING", "RUNNING", "STOPPED", "SUCCEEDED", "FAILED")
"""Ray's JobStatus values: the only statuses a job-table row may carry."""


def _ray_job(details: dict[str, Any]) -> RayJob | None:
    """One row of the job table, as Ray's JobDetails names its fields; a field of the wrong type
    reads as unset (the table is hostile input: anyone who reaches the dashboard can submit). A row
    with a status Ray does not have is left out, unless it carries argus's labels: argus acts on no
    run of its own it cannot read."""
    metadata = details.get("metadata")
    submission_id = _text(details.get("submission_id")) or _text(details.get("job_id"))
    if not submission_id:
        raise MalformedAnswer(f"a job row has no submission id (its keys: {plain(', '.join(map(str, details)))[:200]})")
    status = _text(details.get("status"))
    if status not in RAY_STATUSES:
        if not (isinstance(metadata, dict) and "argus.workspace" in metadata):
            return None
        shown = plain(repr(details.get("status")))[:40]
        raise ClusterRequestFailed(f"Ray reports job {plain(submission_id)[:80]!r} as {shown}, not "
                                   f"one of Ray's job statuses ({', '.join(RAY_STATUSES)}): is the cluster's Ray newer "
                                   "than this argus knows? argus acts on no run of its own it cannot read.")
    return RayJob(
        submission_id=submission_id,
        status=status,
        entrypoint=_text(details.get("entrypoint")),  # kept as sent: compared, and escaped where shown
        metadata={str(k): str(v) for k, v in metadata.items()} if isinstance(metadata, dict) else {},
        message=plain(_text(details.get("message"))),
        start_time=_whole(details.get("start_time")),
        end_time=_whole(details.get("end_time")),
        driver_node_id=_text(details.get("driver_node_id")) or None,
        error_type=plain(_text(details.get("error_type")), lines=False) or None,
        driver_exit_code=_whole(details.get("driver_exit_code")),
        ray_job_id=job_id if (job_id := _text(details.get("job_id"))) and held.HEX_ID.fullmatch(job_id) else None,
        driver_pid=driver_pid(details.get("driver_info")),
        env_values=_env_values(details.get("runtime_env")),
    )


MAX_ENV_VALUES = 256
"""Env values of one job kept (bounded: the job table is hostile input)."""


def _env_values(runtime_env: Any) -> tuple[str, ...]:
    env = runtime_env.get("env_vars") if isinstance(runtime_env, dict) else None
    if not isinstance(env, dict):
        return ()
    return tuple(value[:4096] for value in list(env.values())[:MAX_ENV_VALUES] if isinstance(value, str))


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _whole(value: Any) -> int | None:
    """An int as Ray sends one (times in ms, exit codes); anything else, or one no float holds, unset."""
    return value if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**53 else None


def _amount(value: Any) -> float | None:
    """A resource amount: a finite number, or None."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not abs(value) < 1e300:
        return None
    return float(value)


def _dig(body: Any, *keys: str) -> Any:
    """body[k1][k2]... through dicts only; None as soon as a level is not one."""
    for key in keys:
        if not isinstance(body, dict):
            return None
        body = body.get(key)
    return body


def _node(row: dict[str, Any]) -> Node | None:
    """An alive node's row, or None when it names no node."""
    node_id, resources = _text(row.get("node_id")), row.get("resources_total")
    if not node_id:
        return None
    amounts = {str(k): _amount(v) for k, v in resources.items()} if isinstance(resources, dict) else {}
    return Node(node_id=node_id, ip=_text(row.get("node_ip")), is_head=row.get("is_head_node") is True,
                resources={k: v for k, v in amounts.items() if v is not None})


def _summary(err: Exception) -> str:
    """The server's own exception line, not the whole remote traceback Ray forwards."""
    lines = plain(str(err)).strip().splitlines()
    for line in reversed(lines):
        if re.match(r"^[A-Za-z_.]*(Error|Exception): ", line):
            return line.strip()[:400]
    return lines[0][:400] if lines else type(err).__name__


def with_usage(nodes: tuple[Node, ...], usage: dict[str, dict[str, Any]]) -> tuple[Node, ...]:
    """Each node with what it uses. The dashboard camel-cases the report's resource names
    (worker_node -> workerNode): they are matched back to the node's own names."""
    return tuple(node.model_copy(update={"used": _used(node, usage.get(node.node_id))}) for node in nodes)


def _used(node: Node, report: Any) -> dict[str, float]:
    if not isinstance(report, dict):
        return {}
    used = {}
    for name in node.resources:
        pair = report.get(camel(name), report.get(name))
        amount = _amount(pair[0]) if isinstance(pair, list) and pair else None
        if amount is not None and amount >= 0:
            used[name] = amount
    return used


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)
