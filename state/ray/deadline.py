"""HTTP requests with a total deadline: requests' `timeout=` bounds each socket read, not the request.

A dashboard that trickles a byte every few seconds (or never answers after accepting) must not hold
argus past --timeout: the whole request runs on a worker thread and its sockets are cut at the deadline.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from typing import Any

MAX_ANSWER_BYTES = 64 * 2**20
"""The most of one answer's body argus reads (64 MiB, after any content decoding): a job table of tens of
thousands of runs fits; a dashboard answering more is refused, its body never held whole in memory."""
CHUNK = 2**16


class AnswerTooLarge(ValueError):
    """The body went past the cap; the connection was closed with the rest unread."""

    def __init__(self, limit: int):
        super().__init__(f"the answer is larger than {limit // 2**20} MiB, the most argus reads of one answer")
        self.limit = limit


class Budget:
    """One command's patience with one dashboard: the seconds its failed tries and the waits between
    them may take in all, however many requests the command makes (threads share it).

    A retry is made only while some of it is left, and no try waits longer than what is left: a dashboard
    that fails twice per request costs the command `seconds` once, never once per request or per try."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self._spent = 0.0
        self._lock = threading.Lock()

    def left(self) -> float:
        with self._lock:
            return max(0.0, self.seconds - self._spent)

    def spend(self, seconds: float) -> None:
        with self._lock:
            self._spent += max(0.0, seconds)

    @contextlib.contextmanager
    def charged_on_failure(self) -> Any:
        """The time of the block is spent when the block raises."""
        started = time.monotonic()
        try:
            yield
        except BaseException:
            self.spend(time.monotonic() - started)
            raise


def request_within(seconds: float, method: str, url: str, limit: int = MAX_ANSWER_BYTES, **kwargs: Any) -> Any:
    """One HTTP request, body read (at most `limit` bytes of it: else AnswerTooLarge), that ends within
    `seconds` in total; else requests.Timeout.

    requests' `timeout=` bounds each socket read, not the request: a dashboard that trickles a byte
    of its headers or body every few seconds keeps the request alive forever. stream=True and a
    chunk loop checking a deadline would bound the body only: http.client reads the status line and
    headers with no hook between bytes. So the request runs on a worker thread and the caller waits
    for it at most `seconds`. Past that the caller raises, and shuts down the sockets the request
    opened (recorded by the connection class below): a recv blocked in the worker then returns at
    once, so no thread or socket outlives the deadline by more than a moment. (Behind an HTTP proxy
    the sockets are not recorded; the deadline holds all the same, and the worker ends at the
    server's next silence of `seconds`.)
    """
    import requests

    sockets = _Sockets()
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            with _recording_session(sockets) as session:
                response = session.request(method, url, timeout=seconds, stream=True, **kwargs)
                with contextlib.closing(response):
                    response._content = _body(response, limit)  # what .text and .json() read
                outcome["response"] = response
        except BaseException as err:  # handed to the caller, which raises it
            outcome["error"] = err

    worker = threading.Thread(target=run, name=f"argus {method} {url}", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        sockets.cut()
        raise requests.Timeout(f"{method} {url}: no complete answer within {seconds:g}s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["response"]


def _body(response: Any, limit: int) -> bytes:
    """The body, read a chunk at a time and refused as soon as it passes `limit`: a dashboard's answer
    of any size (or one that never ends) costs at most `limit` bytes of memory."""
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > limit:
        raise AnswerTooLarge(limit)
    chunks, size = [], 0
    for chunk in response.iter_content(CHUNK):  # decoded; requests words a broken body as its own errors
        size += len(chunk)
        if size > limit:
            raise AnswerTooLarge(limit)
        chunks.append(chunk)
    return b"".join(chunks)


class _Sockets:
    """The sockets one request opened, so that the waiting thread can cut them at the deadline."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._cut = False

    def add(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.append(sock)
            cut = self._cut
        if cut:  # connected after the deadline: end it before it sends or reads anything
            _shut(sock)

    def cut(self) -> None:
        with self._lock:
            self._cut = True
            opened = list(self._open)
        for sock in opened:
            _shut(sock)


def _shut(sock: socket.socket) -> None:
    """shutdown, not close: it wakes a recv blocked in another thread (close does not, reliably)."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def _recording_session(sockets: _Sockets) -> Any:
    """A requests session whose every new TCP connection is recorded in `sockets`."""
    import requests
    from requests.adapters import HTTPAdapter
    from urllib3.connection import HTTPConnection, HTTPSConnection
    from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

    def recording(base: type) -> type:
        class Recording(base):  # type: ignore[misc, valid-type]
            def _new_conn(self) -> socket.socket:
                sock = super()._new_conn()
                sockets.add(sock)
                return sock

        return Recording

    class Pool(HTTPConnectionPool):
        ConnectionCls = recording(HTTPConnection)

    class TlsPool(HTTPSConnectionPool):
        ConnectionCls = recording(HTTPSConnection)

    adapter = HTTPAdapter()
    adapter.poolmanager.pool_classes_by_scheme = {"http": Pool, "https": TlsPool}
    session = requests.Session()
    session.trust_env = False  # proxy and CA come from state.ray.transport (the websocket's too); never ~/.netrc
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session
