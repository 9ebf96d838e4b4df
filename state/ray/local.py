"""The embedded dev cluster: a Ray head and a `worker_node` node on loopback.

The worker's shape (CPUs, logical GPUs, custom resources) is the caller's to choose, so that a laptop
can offer what a verl job asks for: Ray admits logical GPUs that no device backs.

Every process it starts is recorded (its process group and, at teardown, all descendants), and
`down` kills exactly those: never `ray stop`, which would stop every Ray on the machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

from specs.errors import ArgusError
from specs.kinds import held_variables
from state.root_key import without_keys

# Ray replaces 127.0.0.1 with the machine's routable IP; other loopback addresses it keeps.
HEAD_IP = "127.0.0.2"
WORKER_IP = "127.0.0.3"
STATE_FILE = "cluster.json"
TOKEN_FILE = "auth_token"
"""With token authentication: the cluster's token, mode 0600, in the state directory."""
AUTH_VARIABLES = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")
"""Never inherited from the caller: the local cluster's auth is what `up` was asked for, nothing else."""


@dataclass
class LocalCluster:
    state_dir: str
    dashboard_port: int
    gcs_port: int
    temp_dir: str
    process_groups: list[int] = field(default_factory=list)
    auth_token_file: str | None = None
    """Absolute path of the token file when the cluster runs with RAY_AUTH_MODE=token."""
    nodes: dict[str, dict[str, float]] = field(default_factory=dict)
    """Role (head, worker) -> the resources `ray start` was given: CPU, GPU and custom ones.
    Empty in the state of a cluster started before shapes were recorded."""

    @property
    def address(self) -> str:
        return f"http://127.0.0.1:{self.dashboard_port}"


WORKER_NODE_SLOTS = 4.0
"""worker_node on the second node: each driver asks for 1, so this many drivers fit at once."""
RAY_OWN_RESOURCES = ("CPU", "GPU", "memory", "object_store_memory")
"""Names `ray start --resources` refuses (they have flags of their own): never custom resources."""


def up(state_dir: Path, dashboard_port: int = 8265, worker_resources: dict[str, float] | None = None,
       worker_gpus: int = 0, cpus_per_node: int = 4, timeout: float = 90.0, auth_token: bool = False,
       worker_cpus: int | None = None) -> LocalCluster:
    """Start head + worker; return once the dashboard answers and both nodes are alive.

    The worker offers `worker_cpus` CPUs (default: `cpus_per_node`, the head's), `worker_gpus`
    logical GPUs and `worker_resources` merged over {"worker_node": WORKER_NODE_SLOTS}: worker_node
    stays unless given, and a resource given as 0 is not offered at all.
    With `auth_token`, both nodes run with RAY_AUTH_MODE=token and a fresh random token, written to
    <state_dir>/auth_token (0600) for a Cluster spec's `auth_token:` to point at. Without it token
    authentication is off, even where ~/.ray/auth_token exists (`ray start` would turn it on then).
    """
    ray_cli()
    existing = load(state_dir)
    if existing is not None and alive_pids(existing):
        raise ArgusError(f"A local cluster is already up at {existing.address} (state in {state_dir}). "
                         "Run `argus local down` first.")
    _require_free(dashboard_port)
    cluster = LocalCluster(str(state_dir), dashboard_port, _free_port(),
                           tempfile.mkdtemp(prefix="argus-ray-", dir="/tmp"))
    cluster.nodes = {"head": {"CPU": cpus_per_node, "GPU": 0},
                     "worker": worker_shape(cpus_per_node if worker_cpus is None else worker_cpus,
                                            worker_gpus, worker_resources)}
    state_dir.mkdir(parents=True, exist_ok=True)
    try:
        if auth_token:
            cluster.auth_token_file = str(_write_token(state_dir.absolute() / TOKEN_FILE))
        _ray_start(cluster, _head_args(cluster, cpus_per_node), "head")
        _ray_start(cluster, _worker_args(cluster, cluster.nodes["worker"]), "worker")
        _wait_ready(cluster, nodes=2, timeout=timeout)
    except BaseException:
        down(state_dir)
        raise
    return cluster


def worker_shape(cpus: float, gpus: float, resources: dict[str, float] | None = None) -> dict[str, float]:
    """What the worker offers: CPU, GPU, then worker_node and the given custom resources (0: left out)."""
    custom = {"worker_node": WORKER_NODE_SLOTS} | (resources or {})
    return {"CPU": cpus, "GPU": gpus} | {name: amount for name, amount in custom.items() if amount}


def down(state_dir: Path, grace: float = 10.0) -> list[int]:
    """Kill the processes this cluster started (and their descendants); return their pids."""
    cluster = load(state_dir)
    if cluster is None:
        return []
    pids = alive_pids(cluster)
    # The GCS last, as `ray stop` does: raylets and agents told to stop while the GCS still answers are
    # gone in a second; told together with it they wait ~10 s for it, and it outlives SIGTERM.
    gcs = [p for p in pids if _command_name(p) == "gcs_server"]
    for group in ([p for p in pids if p not in gcs], gcs):
        _signal(group, signal.SIGTERM)
        _wait_gone(group, grace)
    _signal([p for p in pids if _exists(p)], signal.SIGKILL)
    _wait_gone(pids, 5.0)
    shutil.rmtree(cluster.temp_dir, ignore_errors=True)
    if cluster.auth_token_file:  # the token dies with the cluster: no secret is left lying around
        Path(cluster.auth_token_file).unlink(missing_ok=True)
    (state_dir / STATE_FILE).unlink(missing_ok=True)
    return pids


def load(state_dir: Path) -> LocalCluster | None:
    path = Path(state_dir) / STATE_FILE
    if not path.exists():
        return None
    return LocalCluster(**json.loads(path.read_text()))


def alive_pids(cluster: LocalCluster) -> list[int]:
    """Members of the recorded process groups, plus every descendant (job drivers included)."""
    table = _process_table()
    ours = {pid for pid, (_, pgid) in table.items() if pgid in cluster.process_groups}
    grew = True
    while grew:
        children = {pid for pid, (ppid, _) in table.items() if ppid in ours} - ours
        ours |= children
        grew = bool(children)
    return sorted(ours - {os.getpid()})


def _head_args(c: LocalCluster, cpus: int) -> list[str]:
    return ["--head", f"--node-ip-address={HEAD_IP}", f"--port={c.gcs_port}", "--dashboard-host=127.0.0.1",
            f"--dashboard-port={c.dashboard_port}", f"--num-cpus={cpus}", "--num-gpus=0",
            f"--ray-client-server-port={_free_port()}", *_node_args(c)]


def _worker_args(c: LocalCluster, shape: dict[str, float]) -> list[str]:
    custom = {name: amount for name, amount in shape.items() if name not in RAY_OWN_RESOURCES}
    return [f"--address={HEAD_IP}:{c.gcs_port}", f"--node-ip-address={WORKER_IP}", f"--num-cpus={shape['CPU']:g}",
            f"--num-gpus={shape['GPU']:g}", f"--resources={json.dumps(custom)}", *_node_args(c)]


def _node_args(c: LocalCluster) -> list[str]:
    """Ports every node needs of its own when two nodes share one machine."""
    return [f"--temp-dir={c.temp_dir}", "--object-store-memory=100000000", "--disable-usage-stats",
            f"--dashboard-agent-listen-port={_free_port()}", f"--dashboard-agent-grpc-port={_free_port()}",
            f"--metrics-export-port={_free_port()}", f"--runtime-env-agent-port={_free_port()}",
            "--min-worker-port=0", "--max-worker-port=0"]


def ray_cli() -> Path:
    """Ray's `ray` command beside argus's Python: argus installs it only with its `local` extra."""
    ray = Path(sys.executable).with_name("ray")
    if not ray.is_file():
        raise ArgusError(f"argus local runs Ray's `ray` command, and {ray} is missing: argus installs Ray only when "
                         "asked, with its `local` extra. Install it into the environment argus runs in: "
                         f"{sys.executable} -m pip install 'argus-ray[local]'")
    return ray


def _ray_start(cluster: LocalCluster, args: list[str], role: str) -> None:
    """`ray start` in a new session: its daemons inherit the process group we record."""
    ray = ray_cli()
    env = node_env(cluster, role)
    log = Path(cluster.state_dir) / f"ray-start-{role}.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([str(ray), "start", *args], stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, env=env, cwd=cluster.state_dir)
    cluster.process_groups.append(proc.pid)  # recorded before waiting: a hung start is still ours
    _save(cluster)
    try:
        code = proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        code = -1
    if code != 0:
        tail = log.read_text()[-1500:]
        raise ArgusError(f"`ray start` for the local {role} failed (exit {code}); its log ({log}) ends:\n{tail}")


def node_env(cluster: LocalCluster, role: str) -> dict[str, str]:
    """The environment of a node, and so of every job it runs: never argus's keys (ARGUS_ROOT_KEY
    signs the shared root's queue, lease and sent events; a job holding it could forge them), nor any
    other variable argus holds for itself (specs.kinds.held_variables: git tokens, dashboard credentials,
    notification URLs), which a job could not name in its spec either."""
    unset = ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS", *AUTH_VARIABLES)
    inherited = {k: v for k, v in os.environ.items() if k not in unset and not held_variables.held(k)}
    env = without_keys(inherited) | _auth_env(cluster)
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    env["ARGUS_LOCAL_NODE"] = role  # inherited by everything the node runs: a job can tell where it is
    # Stack dumps of a stalled run's processes (docs/incidents.md): the dashboard's profiling, off by default, on
    # for this one-user loopback cluster; py-spy, which ray[default] installs beside `ray`, on the nodes' PATH.
    env.setdefault("RAY_DASHBOARD_ENABLE_PROFILING", "1")
    env["PATH"] = os.pathsep.join(p for p in (str(Path(sys.executable).parent), env.get("PATH", "")) if p)
    return env


def _write_token(path: Path) -> Path:
    """A fresh random token (Ray's own kind: 64 hex digits), in a file only its owner can read."""
    path.unlink(missing_ok=True)  # O_EXCL below: created 0600 from the start, never widened
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(secrets.token_hex(32) + "\n")
    return path


def _token(cluster: LocalCluster) -> str | None:
    return Path(cluster.auth_token_file).read_text().strip() if cluster.auth_token_file else None


def _auth_env(cluster: LocalCluster) -> dict[str, str]:
    """Both nodes (and every job driver, which inherits it) get the token itself: the driver's
    ray.init() needs it to reach the GCS."""
    token = _token(cluster)
    return {"RAY_AUTH_MODE": "disabled"} if token is None else {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token}


def _wait_ready(cluster: LocalCluster, nodes: int, timeout: float) -> None:
    token = _token(cluster)
    request = urllib.request.Request(f"{cluster.address}/api/v0/nodes?limit=100&detail=true",
                                     headers={"Authorization": f"Bearer {token}"} if token else {})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                rows = json.load(response)["data"]["result"]["result"]
            if sum(r.get("state") == "ALIVE" for r in rows) >= nodes:
                return
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.5)
    raise ArgusError(f"The local cluster at {cluster.address} did not report {nodes} alive nodes "
                     f"within {timeout:.0f}s; see the logs in {cluster.state_dir}.")


def _save(cluster: LocalCluster) -> None:
    (Path(cluster.state_dir) / STATE_FILE).write_text(json.dumps(asdict(cluster), indent=2))


def _process_table() -> dict[int, tuple[int, int]]:
    """pid -> (ppid, pgid), read from /proc."""
    table = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        table[int(stat.parent.name)] = (int(fields[1]), int(fields[2]))
    return table


def _wait_gone(pids: list[int], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(_exists(p) for p in pids):
        time.sleep(0.1)


def _signal(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _command_name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _exists(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return False
    return fields[0] != "Z"


_HANDED_OUT: set[int] = set()


def _free_port() -> int:
    """A port free now that this process has not handed out before: a cluster's ports are picked one by
    one before any is bound, and two alike (the dashboard's and the client server's, once) fail `ray start`."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


def _require_free(port: int) -> None:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is not "in use"
        try:
            sock.bind(("0.0.0.0", port))
        except OSError as err:
            raise ArgusError(f"Port {port} is in use, so the local dashboard cannot start there. "
                             "Stop what uses it, or pass --dashboard-port.") from err
