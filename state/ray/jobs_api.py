"""Ray's Jobs REST API, spoken directly: the requests Ray's own JobSubmissionClient sends, without
importing Ray.

The API is Ray's documented, stable interface for job submission (docs.ray.io, "Ray Jobs REST API"):
`POST /api/jobs/`, `GET /api/jobs/`, `GET|DELETE /api/jobs/{id}`, `POST /api/jobs/{id}/stop`,
`GET /api/jobs/{id}/logs`, the websocket `/api/jobs/{id}/logs/tail`, and `GET /api/version`. Importing
Ray's client to send them costs 0.6-0.9 s of CPU (the whole of `ray`, its core worker included),
more than everything else `argus plan` or `apply` imports. argus never uploads a working_dir (a job
runs in place from its snapshot on the shared root) and sends only `env_vars` in its runtime_env,
which is all of the SDK's client-side work that is skipped.

Every request goes to the address given and carries exactly the headers given: no RAY_ADDRESS, no
token of this process's own, no ~/.netrc login, and no redirect is followed (a pull request may name
the dashboard: one answering 307 must not get a job's body or the token sent on elsewhere). Submission
ids are quoted into the path, so an id read from Ray's job table (hostile input) cannot name another
endpoint. Nothing the dashboard answers can carry the cluster's token into a message: it is masked.
TLS trust, client certificate, proxy and extra headers come from one state.ray.transport.Transport,
the same for the REST calls and the log websocket; the address may carry a path prefix.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

from state.ray.answers import flag, keep_alive, submitted
from state.ray.deadline import Budget, request_within
from state.ray.transport import Transport, websocket_proxy

AUTH_STATUSES = (401, 403)
"""What Ray's token middleware answers: 401 when no token came, 403 when it is wrong."""
MIN_VERSION_RESOURCES = ("2.2", "entrypoint_num_cpus, entrypoint_num_gpus and entrypoint_resources")
MIN_VERSION_MEMORY = ("2.8", "entrypoint_memory")
"""The Ray versions whose job server knows these submit fields (an older one refuses the request)."""
NORMAL_CLOSE = 1000
"""How the dashboard ends a log stream when the job has ended; any other code (a head going away
included) is a stream cut short, not the end of the log. No ping is sent: Ray 2.60's head proxies the
stream without reading from it, so a ping is never answered and a quiet run would look dead."""
QUIET_CHECK = 30.0
"""Seconds a followed log may say nothing before argus asks the dashboard (REST) whether it is still there:
a dead peer is reported within QUIET_CHECK + timeout, a quiet run is followed on."""
MIN_MASKED = 8
"""Tokens at least this long are masked in the dashboard's answers; a shorter one would mask Ray's own words."""


class RayRefused(RuntimeError):
    """The dashboard answered with an error status; the message carries its status and body, as Ray's
    SDK words it ("Request failed with status code 404: ..."). Status 0: argus refused the request itself."""

    def __init__(self, status: int, body: str):
        super().__init__(f"Request failed with status code {status}: {body}." if status else body)
        self.status = status


class MalformedAnswer(ValueError):
    """The dashboard answered 200 with JSON of a shape Ray never sends (a job list that is not a list, a row
    that is not an object): an error, never read as "no jobs", since an empty table admits as if all were free."""


class AuthRefused(Exception):
    """The dashboard's token middleware refused the request (401: no token came, 403: a wrong one).
    Its body is not kept: the caller words the message, and nothing the server sent can carry a token on."""

    def __init__(self, status: int):
        super().__init__(f"the dashboard answered {status}")
        self.status = status


class JobsApi:
    """One dashboard's job endpoints; every request ends within `timeout` seconds in all."""

    def __init__(self, address: str, timeout: float, headers: dict[str, str], budget: Budget | None = None,
                 transport: Transport | None = None):
        """`budget`: what the command has left for this dashboard's failures; a read waits no longer.
        `transport`: TLS, proxy and extra headers, the same for the REST calls and the log stream."""
        self.address = address.rstrip("/")
        self.timeout = timeout
        self.budget = budget
        self.headers = dict(headers)
        self._version: str | None = None
        self.quiet_check = QUIET_CHECK
        self._secrets = [token for value in headers.values() if len(token := value.split(" ", 1)[-1]) >= MIN_MASKED]
        """The token the headers carry: masked in whatever the dashboard answers (one may echo a request's
        headers in its error)."""
        self.transport = transport or Transport()
        self.headers.update(self.transport.headers)
        self._secrets += [value for value in self.transport.secrets if len(value) >= MIN_MASKED]

    def version(self) -> dict[str, Any]:
        body = _object(self.get_json("/api/version"), "the version")
        self._version = str(body.get("ray_version", ""))
        return body

    def list_jobs(self) -> list[dict[str, Any]]:
        rows = self.get_json("/api/jobs/")
        if not isinstance(rows, list):
            raise MalformedAnswer(f"the job list is a JSON {_kind(rows)}, not a list")
        for row in rows:
            _object(row, "a row of the job list")
        return rows

    def job_info(self, submission_id: str) -> dict[str, Any]:
        return _object(self.get_json(f"/api/jobs/{_quoted(submission_id)}"), "the job")

    def submit(self, body: dict[str, Any]) -> None:
        """POST the job; `body` holds JobSubmitRequest's fields. Unset fields are left out, as the
        SDK does, and the fields an old job server would refuse are checked against its version."""
        body = {key: value for key, value in body.items() if value is not None}
        if any(body.get(k) for k in ("entrypoint_num_cpus", "entrypoint_num_gpus", "entrypoint_resources")):
            self._require(*MIN_VERSION_RESOURCES)
        if body.get("entrypoint_memory"):
            self._require(*MIN_VERSION_MEMORY)
        submitted(_json(self._call("POST", "/api/jobs/", json=body)), body.get("submission_id"))

    def stop(self, submission_id: str) -> bool:
        """True when Ray stopped the job, False when it had already ended."""
        return flag(_json(self._call("POST", f"/api/jobs/{_quoted(submission_id)}/stop")), "stopped", "stop")

    def delete(self, submission_id: str) -> None:
        if not flag(_json(self._call("DELETE", f"/api/jobs/{_quoted(submission_id)}")), "deleted", "delete"):
            raise RayRefused(0, f"the dashboard answered that job {submission_id} was not deleted")

    def logs(self, submission_id: str) -> str:
        body = _object(self.get_json(f"/api/jobs/{_quoted(submission_id)}/logs"), "the job's logs")
        logs = body.get("logs")
        if not isinstance(logs, str):
            raise MalformedAnswer(f"the job's logs are a JSON {_kind(logs)}, not a string")
        return logs

    def get_json(self, endpoint: str) -> Any:
        return self._call("GET", endpoint).json()

    def get_text(self, endpoint: str) -> str:
        return str(self._call("GET", endpoint).text)

    async def tail(self, submission_id: str) -> AsyncIterator[str]:
        """The driver log as it grows, until the job ends (the dashboard closes the websocket). The
        handshake ends within `timeout`; the stream then lasts as long as the run does."""
        import asyncio  # only `argus logs --follow` streams: every other command is spared importing these

        import aiohttp

        url = f"{self.address}/api/jobs/{_quoted(submission_id)}/logs/tail"
        traces = aiohttp.TraceConfig()
        traces.on_request_redirect.append(self._refuse_redirect)
        timeout = aiohttp.ClientTimeout(total=None, connect=self.timeout, sock_connect=self.timeout)
        async with aiohttp.ClientSession(headers=self.headers, timeout=timeout, trace_configs=[traces]) as session:
            tls = self.transport.ssl_context() if url.startswith("https:") else True  # True: plain http ignores it
            proxy, login = websocket_proxy(url)
            # The proxy's login: on its CONNECT for https; on the request itself, which the proxy reads, for http.
            where = {"proxy_headers": login} if url.startswith("https:") else {"headers": login}
            try:
                connecting = session.ws_connect(url, ssl=tls, proxy=proxy, **where)
                ws = await asyncio.wait_for(connecting, self.timeout)
            except aiohttp.WSServerHandshakeError as err:
                if err.status in AUTH_STATUSES:
                    raise AuthRefused(err.status) from None
                raise RayRefused(err.status, self._masked(err.message)) from None
            keep_alive(ws.get_extra_info("socket"))
            while True:
                try:
                    message = await ws.receive(timeout=self.quiet_check)
                except asyncio.TimeoutError:
                    await self._alive_or_raise(submission_id)
                    continue
                if message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSING, aiohttp.WSMsgType.CLOSED):
                    break
                if message.type == aiohttp.WSMsgType.TEXT:
                    yield message.data
                elif message.type == aiohttp.WSMsgType.ERROR:
                    raise RayRefused(0, self._masked(f"the log stream broke: {ws.exception()}"))
            if ws.close_code != NORMAL_CLOSE:
                raise RayRefused(0, f"the log stream was cut short (websocket close code {ws.close_code})")

    async def _alive_or_raise(self, submission_id: str) -> None:
        """The stream said nothing for `quiet_check` seconds: a quiet run, or a dead peer? Ray's head answers
        no websocket ping (NORMAL_CLOSE), so a status request on the REST path asks instead."""
        import asyncio

        try:
            await asyncio.wait_for(asyncio.to_thread(self.job_info, submission_id), self.timeout + 1)
        except (AuthRefused, MalformedAnswer, RayRefused):
            return  # it answered: alive (an auth failure is reported when the stream ends)
        except Exception as err:  # noqa: BLE001 -- any failure of the probe means the same: the peer is gone
            raise RayRefused(0, self._masked(
                f"the log stream went silent: no line for {self.quiet_check:g}s and the dashboard did not answer a "
                f"status request within {self.timeout:g}s ({type(err).__name__}); the head, or the network to it, "
                "may be down. Check `argus status`, then follow again")) from None

    def _call(self, method: str, endpoint: str, **kwargs: Any) -> Any:
        """A read waits no longer than the command's budget has left; a write is given the whole timeout
        (cut short, it would leave argus not knowing whether Ray took it)."""
        seconds = self.timeout if method != "GET" or self.budget is None else min(self.timeout, self.budget.left())
        response = request_within(seconds, method, self.address + endpoint, headers=self.headers,
                                  allow_redirects=False, auth=_no_netrc,
                                  **self.transport.requests_options(self.address + endpoint), **kwargs)
        status = response.status_code
        if status in AUTH_STATUSES:
            raise AuthRefused(status)
        if 300 <= status < 400:
            where = self._masked(str(response.headers.get("Location", "?")))[:200]
            raise RayRefused(status, f"the dashboard redirects to {where}; argus follows no redirect: if that is the "
                                     "cluster's dashboard, make it the cluster's address")
        if status != 200:
            raise RayRefused(status, self._masked(response.text))
        return response

    async def _refuse_redirect(self, _session: Any, _context: Any, params: Any) -> None:
        where = self._masked(str(params.response.headers.get("Location", "?")))[:200]
        raise RayRefused(params.response.status, f"the dashboard redirects the log stream to {where}; argus "
                                                 "follows no redirect")

    def _masked(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def _require(self, minimum: str, fields: str) -> None:
        """Once per client: the head's Ray is new enough for the fields sent (the SDK's own check)."""
        if self._version is None:
            self.version()
        running = self._version or ""
        if _release(running) < _release(minimum):
            raise RayRefused(0, f"Ray {running or '(unknown version)'} is running on the cluster; {fields} "
                                f"need Ray {minimum} or higher on the cluster")


def _object(body: Any, what: str) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise MalformedAnswer(f"{what} is a JSON {_kind(body)}, not an object")
    return body


def _json(response: Any) -> Any:
    """The body as JSON; None when it is not JSON (the answer checks then refuse it)."""
    try:
        return response.json()
    except ValueError:
        return None


def _kind(body: Any) -> str:
    return {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null"}.get(
        type(body), "number")


def _no_netrc(request: Any) -> Any:
    """An auth that adds nothing: requests looks up ~/.netrc only when a request has no auth, and a login
    found there for the dashboard's host must not be sent to an address a pull request wrote."""
    return request


def _quoted(submission_id: str) -> str:
    """One path segment, whatever the id holds: '/', '?', '#' are escaped. An id of dots alone cannot be
    one (requests sends %2E as '.', and a server resolves `/api/jobs/..` to `/api/`): it is refused."""
    if submission_id in ("", ".", ".."):
        raise RayRefused(0, f"{submission_id!r} is not a submission id argus sends a request for")
    return quote(submission_id, safe="")


def _release(version: str) -> tuple[int, ...]:
    """The numeric release of a version string ("2.60.0rc1" -> (2, 60, 0)); () when it has none."""
    match = re.match(r"^\s*v?(\d+(?:\.\d+)*)", version)
    return tuple(int(part) for part in match.group(1).split(".")) if match else ()
