"""argus local up|down|status: the embedded dev cluster.

The state directory arrives as typed (its default is `~/.argus/local`): `~` is expanded here, when
the command runs, not when the CLI module is imported. `make demo` asks `demo_port` where the
dashboard goes, so that a machine whose 8265 is taken still runs the demo.

`--worker-gpus/--worker-cpus/--worker-resources` give the worker a verl-sized shape (8 GPUs, 3 CPUs
per GPU) so that such jobs can be planned and queued on a laptop; its GPUs are logical, nothing runs
on them. The resources JSON is checked here, before anything starts, so a typo starts no cluster.
"""

from __future__ import annotations

import json
import math
import os
import socket
from collections.abc import Mapping
from pathlib import Path

import typer

from specs.errors import ArgusError
from state.ray import local

DEMO_PORT_VARIABLE = "ARGUS_DEMO_PORT"
DEFAULT_PORT = 8265
"""Ray's own dashboard port, which the examples' cluster.yaml names."""
RESOURCES_OPTION = "--worker-resources"


def up(state_dir: Path, dashboard_port: int, auth_token: bool = False, worker_gpus: int = 0,
       worker_cpus: int | None = None, worker_resources: str | None = None) -> int:
    state_dir = state_dir.expanduser()
    custom = parse_resources(worker_resources, RESOURCES_OPTION) if worker_resources is not None else None
    cluster = local.up(state_dir, dashboard_port=dashboard_port or local._free_port(), auth_token=auth_token,
                       worker_gpus=worker_gpus, worker_cpus=worker_cpus, worker_resources=custom)
    typer.echo(f"Local Ray cluster is up: dashboard {cluster.address}.")
    for line in _node_lines(cluster):
        typer.echo(f"  {line}")
    if cluster.nodes.get("worker", {}).get("GPU"):
        typer.echo("  The worker's GPUs are logical: Ray schedules on them, no job can use a real GPU through them.")
    if cluster.auth_token_file:
        typer.echo(f"Token authentication is on (RAY_AUTH_MODE=token); the token is in {cluster.auth_token_file} "
                   f"(mode 0600, removed by `argus local down`). Give the workspace's Cluster "
                   f"`auth_token: {cluster.auth_token_file}`.")
    typer.echo(f"Its processes are recorded in {state_dir}; `argus local down` stops exactly those.")
    return 0


def parse_resources(text: str, option: str) -> dict[str, float]:
    """A JSON object of resource name -> non-negative number, or an error naming the option."""
    example = f"""{option} '{{"worker_node": 1, "rack_a": 2}}'"""
    try:
        given = json.loads(text)
    except ValueError as err:
        raise ArgusError(f"{option} is not valid JSON ({err}); give an object, e.g. {example}.") from err
    if not isinstance(given, dict):
        raise ArgusError(f"{option} must be a JSON object of resource name -> amount, not {text!r}; e.g. {example}.")
    return {name: _amount(name, amount, option) for name, amount in given.items()}


def _amount(name: str, amount: object, option: str) -> float:
    if not name.strip():
        raise ArgusError(f"{option} names a resource with an empty name.")
    if name in local.RAY_OWN_RESOURCES:  # `ray start --resources` refuses them
        hint = {"CPU": " (use --worker-cpus)", "GPU": " (use --worker-gpus)"}.get(name, "")
        raise ArgusError(f"{option} cannot set {name!r}: it is one of Ray's own resources{hint}.")
    # bool is an int to Python, and json.loads takes NaN and Infinity: none is an amount
    if isinstance(amount, bool) or not isinstance(amount, int | float) or not math.isfinite(amount) or amount < 0:
        raise ArgusError(f"{option}: {name!r} is {json.dumps(amount)}; an amount is a non-negative number.")
    return float(amount)


def down(state_dir: Path) -> int:
    state_dir = state_dir.expanduser()
    pids = local.down(state_dir)
    typer.echo(f"Stopped {len(pids)} process(es) of the local cluster." if pids else "No local cluster is up.")
    return 0


def status(state_dir: Path, as_json: bool = False) -> int:
    state_dir = state_dir.expanduser()
    cluster = local.load(state_dir)
    if cluster is None:
        typer.echo(json.dumps({"up": False}) if as_json else "No local cluster is up. Start one with `argus local up`.")
        return 1
    pids = local.alive_pids(cluster)
    if as_json:
        typer.echo(json.dumps({"up": bool(pids), "address": cluster.address, "pids": pids,
                               "auth_token_file": cluster.auth_token_file, "nodes": cluster.nodes}))
        return 0 if pids else 1
    state = "up" if pids else "down (its processes are gone; run `argus local down` to clean up)"
    auth = f"; token authentication on, auth_token: {cluster.auth_token_file}" if cluster.auth_token_file else ""
    typer.echo(f"Local cluster {state}: dashboard {cluster.address}, {len(pids)} process(es){auth}.")
    for line in _node_lines(cluster):
        typer.echo(f"  {line}")
    return 0 if pids else 1


def demo_port(environ: Mapping[str, str] = os.environ, preferred: int = DEFAULT_PORT) -> int:
    """The demo's dashboard port: $ARGUS_DEMO_PORT if set, else 8265 while it is free, else any free port."""
    given = environ.get(DEMO_PORT_VARIABLE, "").strip()
    if given:
        if not (given.isascii() and given.isdigit() and 0 < int(given) < 65536):
            raise ArgusError(f"{DEMO_PORT_VARIABLE}={given!r} is not a port number (1 to 65535).")
        return int(given)
    return preferred if _is_free(preferred) else local._free_port()


def _node_lines(cluster: local.LocalCluster) -> list[str]:
    """`head   127.0.0.2: CPU 4, GPU 0`: each node's shape as `ray start` was given it."""
    ips = {"head": local.HEAD_IP, "worker": local.WORKER_IP}
    return [f"{role:<6} {ips.get(role, '?')}: " + ", ".join(f"{name} {amount:g}" for name, amount in shape.items())
            for role, shape in cluster.nodes.items()]


def _is_free(port: int) -> bool:
    """As `argus local up` will check it: nothing listens on the port, on any address."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is not "in use"
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


if __name__ == "__main__":  # `make demo`: print the port, or say why not
    from reconcile.boundary import guarded

    raise SystemExit(guarded(lambda _: typer.echo(demo_port())))
