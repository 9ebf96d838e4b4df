"""argus local up|down|status: the embedded dev cluster.

The state directory arrives as typed (its default is `~/.argus/local`): `~` is expanded here, when
the command runs, not when the CLI module is imported. `make demo` asks `demo_port` where the
dashboard goes, so that a machine whose 8265 is taken still runs the demo.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping
from pathlib import Path

import typer

from specs.errors import ArgusError
from state import local

DEMO_PORT_VARIABLE = "ARGUS_DEMO_PORT"
DEFAULT_PORT = 8265
"""Ray's own dashboard port, which the examples' cluster.yaml names."""


def up(state_dir: Path, dashboard_port: int, auth_token: bool = False) -> int:
    state_dir = state_dir.expanduser()
    cluster = local.up(state_dir, dashboard_port=dashboard_port or local._free_port(), auth_token=auth_token)
    typer.echo(f"Local Ray cluster is up: dashboard {cluster.address} (head {local.HEAD_IP}, "
               f"worker {local.WORKER_IP} with worker_node={local.WORKER_NODE_SLOTS:g}).")
    if cluster.auth_token_file:
        typer.echo(f"Token authentication is on (RAY_AUTH_MODE=token); the token is in {cluster.auth_token_file} "
                   f"(mode 0600, removed by `argus local down`). Give the workspace's Cluster "
                   f"`auth_token: {cluster.auth_token_file}`.")
    typer.echo(f"Its processes are recorded in {state_dir}; `argus local down` stops exactly those.")
    return 0


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
                               "auth_token_file": cluster.auth_token_file}))
        return 0 if pids else 1
    state = "up" if pids else "down (its processes are gone; run `argus local down` to clean up)"
    auth = f"; token authentication on, auth_token: {cluster.auth_token_file}" if cluster.auth_token_file else ""
    typer.echo(f"Local cluster {state}: dashboard {cluster.address}, {len(pids)} process(es){auth}.")
    return 0 if pids else 1


def demo_port(environ: Mapping[str, str] = os.environ, preferred: int = DEFAULT_PORT) -> int:
    """The demo's dashboard port: $ARGUS_DEMO_PORT if set, else 8265 while it is free, else any free port."""
    given = environ.get(DEMO_PORT_VARIABLE, "").strip()
    if given:
        if not (given.isascii() and given.isdigit() and 0 < int(given) < 65536):
            raise ArgusError(f"{DEMO_PORT_VARIABLE}={given!r} is not a port number (1 to 65535).")
        return int(given)
    return preferred if _is_free(preferred) else local._free_port()


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
