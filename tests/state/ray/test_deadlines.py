"""Every request to a Ray dashboard ends within the client's timeout in total, not per byte read.

A real HTTP server on 127.0.0.1 (raw sockets on threads) plays a dashboard that never answers, one
that trickles its body, one that trickles its headers, ones that fail the first two tries of every
request (hanging, or cutting the connection), and a healthy one. Reads retry, but failed tries and the
backoff between them share one budget of `timeout` per client (one client per command): a bad dashboard
ends the command's reading within ~timeout, however many requests it would have made.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from state.ray.client import ClusterUnreachable, RayClient

TIMEOUT = 1.0
SLACK = 0.5
"""Past the one deadline: the request threads unwinding, the test's own overhead. A correctness bound:
without the shared budget the same reads take 3 x timeout + 1.5 s per request, four requests a snapshot."""
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\nConnection: close\r\n\r\n"
BODIES = {
    "/api/version": {"ray_version": "2.60.0", "session_name": "session_x", "version": "4"},
    "/api/v0/nodes": {"data": {"result": {"result": [
        {"node_id": "n1", "node_ip": "127.0.0.1", "is_head_node": True, "state": "ALIVE",
         "resources_total": {"CPU": 2}}]}}},
    "/api/jobs/": [],
    "/api/cluster_status": {"data": {"clusterStatus": {"loadMetricsReport": {"usageByNode": {
        "n1": {"CPU": [1.0, 2.0]}}}}}},
}


class Dashboard:
    """A one-request-per-connection HTTP server; `mode` says how it (mis)behaves."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.stop = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.1)
        self.port = self.listener.getsockname()[1]
        self.conns: list[socket.socket] = []
        self.tries: dict[str, int] = {}
        """Requests seen per path: the flaky modes fail the first two of each."""
        self.threads = [threading.Thread(target=self.accept, daemon=True)]
        self.threads[0].start()

    def accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            self.conns.append(conn)
            handler = threading.Thread(target=self.serve, args=(conn,), daemon=True)
            self.threads.append(handler)
            handler.start()

    def serve(self, conn: socket.socket) -> None:
        try:
            request = b""
            while b"\r\n\r\n" not in request and not self.stop.is_set():
                chunk = conn.recv(4096)
                if not chunk:
                    return
                request += chunk
            path = request.split(b" ")[1].decode().split("?")[0]
            self.tries[path] = self.tries.get(path, 0) + 1
            failing = self.mode.startswith("flaky") and self.tries[path] <= 2
            if self.mode == "silent" or (failing and self.mode == "flaky-hang"):
                self.stop.wait()
            elif failing:  # flaky-cut: the connection closes with no answer at all
                return
            elif self.mode == "body":
                conn.sendall(HEAD)
                self.trickle(conn, b"x" * 1000)
            elif self.mode == "headers":
                self.trickle(conn, HEAD)
            else:
                body = json.dumps(BODIES[path]).encode()
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
        except OSError:
            pass  # the client cut the connection: that is the point
        finally:
            conn.close()

    def trickle(self, conn: socket.socket, data: bytes) -> None:
        for byte in data:
            if self.stop.wait(0.5):
                return
            conn.sendall(bytes([byte]))

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(5)
        self.listener.close()
        assert not any(t.is_alive() for t in self.threads), "server threads still running"


@pytest.fixture
def dashboard(request: pytest.FixtureRequest) -> Iterator[Dashboard]:
    server = Dashboard(request.param)
    try:
        yield server
    finally:
        server.close()


def request_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("argus ") and t.is_alive()]


@pytest.mark.parametrize("dashboard", ["silent", "body", "headers"], indirect=True)
def test_a_stuck_dashboard_fails_within_one_timeout(dashboard: Dashboard) -> None:
    client = RayClient("c", f"http://127.0.0.1:{dashboard.port}", timeout=TIMEOUT)
    start = time.monotonic()
    with pytest.raises(ClusterUnreachable) as err:
        client.snapshot()
    elapsed = time.monotonic() - start
    message = str(err.value)
    assert "'c'" in message and f"127.0.0.1:{dashboard.port}" in message and "did not answer within 1s" in message
    assert TIMEOUT <= elapsed < TIMEOUT + SLACK, f"{dashboard.mode}: failed after {elapsed:.2f}s"
    # The deadline cut the sockets: no request thread outlives it (bar a moment to unwind).
    grace = time.monotonic() + 2
    while request_threads() and time.monotonic() < grace:
        time.sleep(0.05)
    assert not request_threads()


@pytest.mark.parametrize("dashboard", ["flaky-cut", "flaky-hang"], indirect=True)
def test_a_dashboard_failing_twice_per_request_costs_one_deadline_in_all(dashboard: Dashboard) -> None:
    """Each of the snapshot's reads would succeed on its third try: retried in full, four reads would take
    4 x 1.5 s of backoff (cut) or 4 x 2 timeouts (hang). The command's budget ends it within one timeout."""
    client = RayClient("c", f"http://127.0.0.1:{dashboard.port}", timeout=TIMEOUT)
    start = time.monotonic()
    with pytest.raises(ClusterUnreachable, match="'c'"):
        client.snapshot()
    for _ in range(3):  # the rest of the command's reads, on what is left of the budget
        with contextlib.suppress(ClusterUnreachable):
            client.jobs()
    elapsed = time.monotonic() - start
    assert elapsed < TIMEOUT + SLACK, f"{dashboard.mode}: failed after {elapsed:.2f}s"
    if dashboard.mode == "flaky-hang":  # the first try spent it all: nothing more was asked
        assert sum(dashboard.tries.values()) == 1
        with pytest.raises(ClusterUnreachable, match=r"failed for 1s in all during this command"):
            client.jobs()


@pytest.mark.parametrize("dashboard", ["flaky-cut"], indirect=True)
def test_a_generous_deadline_rides_out_the_failures(dashboard: Dashboard) -> None:
    """With a budget that covers the backoff, every read succeeds on its third try."""
    client = RayClient("c", f"http://127.0.0.1:{dashboard.port}", timeout=8)
    state = client.snapshot()
    assert state.ray_version == "2.60.0" and [n.node_id for n in state.nodes] == ["n1"]
    assert dashboard.tries == {path: 3 for path in BODIES}


@pytest.mark.parametrize("dashboard", ["fast"], indirect=True)
def test_a_healthy_dashboard_still_answers(dashboard: Dashboard) -> None:
    client = RayClient("c", f"http://127.0.0.1:{dashboard.port}", timeout=TIMEOUT)
    start = time.monotonic()
    assert client._get_json("/api/version")["ray_version"] == "2.60.0"
    state = client.snapshot()
    assert (state.ray_version, state.session_name, state.jobs) == ("2.60.0", "session_x", ())
    assert [(n.node_id, n.used) for n in state.nodes] == [("n1", {"CPU": 1.0})]
    assert time.monotonic() - start < TIMEOUT


def test_building_a_client_makes_no_request() -> None:
    """Nothing listens on this port: only a request would fail."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    RayClient("c", f"http://127.0.0.1:{port}", timeout=TIMEOUT)


def test_clusters_are_observed_at_the_same_time():
    """Each snapshot waits for the other at a barrier: observed one after another, both would break it."""
    from state.observe import read_clusters
    from state.observed import ClusterState

    barrier = threading.Barrier(2, timeout=5)

    class Meeting:
        def __init__(self, name: str) -> None:
            self.name = name

        def snapshot(self) -> ClusterState:
            barrier.wait()
            return ClusterState(name=self.name, address="http://x:1", session_name="s", ray_version="2.60.0",
                                nodes=(), jobs=())

    clusters, unreachable = read_clusters({"a": Meeting("a"), "b": Meeting("b")})
    assert sorted(clusters) == ["a", "b"] and unreachable == {}
