"""From what argus saw of a cluster to checks: pure functions, each saying what it found and what to do."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specs.diagnostics import plain
from specs.kinds.models import JobDefaults
from state.doctor.checks import Check, fail, ok, warn
from state.doctor.probe import ProbeResult
from state.doctor.script import PROBE_DIR, STATE_FOLDERS
from state.observed import Node
from state.ray.versions import SUPPORTED, version_warning
from state.root_key import AUDIT_KEY_VARIABLE as AUDIT_KEY
from state.root_key import KEY_VARIABLE as ROOT_KEY

SKEW_WARN = 5.0
"""Seconds of clock difference worth a warning: deadlines (max_runtime) and alerts move by the skew."""
AUTH_HOW = ("turn on Ray's token authentication (RAY_AUTH_MODE=token, Ray 2.52 or newer) and point the "
            "cluster's `auth_token:` at the token")


def dashboard(body: dict[str, Any], address: str) -> Check:
    version = plain(str(body.get("ray_version") or "?"))[:40]
    problem = version_warning(body)
    if problem:
        return warn("dashboard", f"Ray {version} answers at {address}, but {problem}")
    return ok("dashboard", f"Ray {version} answers at {address} (argus supports {SUPPORTED})")


def auth(required: bool | None, has_token: bool) -> Check:
    """`required`: what a request without a token got (None: it could not tell). argus's own token worked,
    or the dashboard check would have failed before."""
    if required is None:
        return ok("auth", "argus's requests are answered (whether a request without a token is: unknown)")
    if required:
        return ok("auth", "the dashboard requires a token, and the one the cluster's auth_token names works")
    sent = " (argus sends the one auth_token names; the dashboard does not ask for it)" if has_token else ""
    return warn("auth", f"the dashboard requires no token{sent}: anyone who reaches it can submit, stop and delete "
                        f"jobs. To close it, {AUTH_HOW}")


def keys(environ: Mapping[str, str]) -> Check:
    """Whether argus's own records can be told from a job's: the audit chain (which runs argus submitted and
    stopped) is keyed by ARGUS_AUDIT_KEY, the root's signed files by ARGUS_ROOT_KEY."""
    unset = [name for name in (AUDIT_KEY, ROOT_KEY) if not environ.get(name)]
    if not unset:
        return ok("keys", f"{AUDIT_KEY} and {ROOT_KEY} are set: a job can neither append to argus's audit chain "
                          "nor sign files on the root as argus")
    return warn("keys", f"{' and '.join(unset)} not set: a job that can write the shared root can append records "
                        "argus takes as its own (which runs it submitted and stopped: at most once rests on them) "
                        "and forge its signed files. Set both in argus's environment only (CI secrets, serve's "
                        "unit), never on Ray's nodes")


def gpus(nodes: tuple[Node, ...]) -> Check:
    holding = {node.ip or node.node_id[:12]: node.resources.get("GPU", 0.0) for node in nodes}
    total = sum(holding.values())
    if not total:
        return warn("gpus", f"Ray sees no GPU on its {len(nodes)} alive node(s): a job that asks for GPUs (every "
                            "verl job) waits for ever. Start the workers with their GPUs (`ray start --num-gpus N`) "
                            "and check `ray status`")
    each = ", ".join(f"{ip}: {amount:g}" for ip, amount in sorted(holding.items()) if amount)
    return ok("gpus", f"Ray sees {total:g} GPU(s) on {len(nodes)} alive node(s) ({each})")


def driver_needs(defaults: JobDefaults) -> dict[str, float]:
    """What a driver of this cluster asks Ray for, as nodes name it."""
    needs = {name: float(amount) for name, amount in defaults.entrypoint_resources.items()}
    for name, amount in (("CPU", defaults.entrypoint_num_cpus), ("GPU", defaults.entrypoint_num_gpus),
                         ("memory", defaults.entrypoint_memory)):
        if amount:
            needs[name] = float(amount)
    return needs


def unplaceable(nodes: tuple[Node, ...], defaults: JobDefaults) -> Check | None:
    """A failure when no alive node offers what a driver asks: the probe would wait PENDING, and so would every job."""
    needs = driver_needs(defaults)
    if any(all(node.resources.get(name, 0.0) >= amount for name, amount in needs.items()) for node in nodes):
        return None
    asked = ", ".join(f"{name}: {amount:g}" for name, amount in sorted(needs.items()))
    return fail("probe", f"no alive node offers what the cluster's job_defaults ask for a driver ({asked}): the "
                         "probe, like every job of this cluster, would wait PENDING for ever, so it was not "
                         "submitted. Start a node that offers it (`ray start --resources=...`) or change "
                         "job_defaults")


def probe(result: ProbeResult, nodes: tuple[Node, ...], timeout: float, needs: dict[str, float]) -> list[Check]:
    """The probe's own check, then, when it ran, the root's, argus's state's and the clock's."""
    where = _node_name(result.driver_node_id, nodes)
    ran = _ran(result, where, timeout, needs)
    if ran.level == "fail":
        return [ran, *_cleanup(result)]
    return [ran, *_root_checks(result, where), *_clock(result), *_cleanup(result)]


def _ran(result: ProbeResult, where: str, timeout: float, needs: dict[str, float]) -> Check:
    sid, said = result.submission_id, plain(result.message)[:600]
    if not result.submitted:
        return fail("probe", f"Ray did not take the probe job {sid}: {said}")
    if result.status == "PENDING":
        asked = ", ".join(f"{name}: {amount:g}" for name, amount in sorted(needs.items())) or "nothing"
        return fail("probe", f"the probe {sid} did not start within {timeout:g}s: no node had room for its driver "
                             f"({asked}), and every job of this cluster waits the same way. Check `ray status` "
                             "and what holds the nodes, then run `argus doctor` again (or give it --timeout)")
    if result.status is None or result.status not in ("SUCCEEDED", "FAILED"):
        return fail("probe", f"the probe {sid} did not end within {timeout:g}s ({result.status or 'unknown'}): {said}")
    if result.status == "FAILED" or not result.report.done:
        tail = plain(result.log_tail)[-600:]
        return fail("probe", f"the probe {sid} {result.status} on {where} without reporting what argus asked "
                             f"({said}); its log ends: {tail!r}. Is /bin/sh there, and can the node start jobs?")
    user = f" ({plain(result.report.user or '')[:32]})" if result.report.user else ""
    return ok("probe", f"the probe {sid} ran on {where} as uid {result.report.uid}{user} in {result.seconds:.1f}s")


def _root_checks(result: ProbeResult, where: str) -> list[Check]:
    report, nonce = result.report, result.nonce
    if not report.sees:
        return [fail("shared-root", f"the worker's root is not argus's: on {where} the shared root holds no file "
                                    f"{PROBE_DIR}/{nonce}/from-argus, which argus had just written there, so the "
                                    "directory jobs see at that path is another one than argus reads. Mount the "
                                    "same filesystem at the shared root on every node and where argus runs (or set "
                                    "the cluster's shared_root to the path where they share it)")]
    if not report.wrote:
        return [fail("shared-root", f"on {where} the job sees argus's files but cannot write under the shared root "
                                    f"as uid {report.uid}: runs could keep neither their log nor exit.json there. "
                                    "Mount it read-write for the jobs' user")]
    if result.answer != f"{nonce} {report.uid}":
        return [fail("shared-root", f"the job on {where} wrote its answer under the shared root, but argus reads "
                                    "none there: argus and the node see different contents at that path (NFS "
                                    "caching, or two mounts). Check the mounts on both sides")]
    return [ok("shared-root", f"{where} and argus share the root: each read back the file the other wrote"),
            _argus_state(result)]


def _argus_state(result: ProbeResult) -> Check:
    report = result.report
    written = [folder for folder in STATE_FOLDERS if folder != "." and report.writable.get(folder) == "yes"]
    owner = f"uid {report.owner}" if report.owner and report.owner != "?" else "an unknown user"
    if not written:
        return ok("argus-state", f"jobs cannot write argus's own state: as uid {report.uid} the probe could make "
                                 f"no file in .argus or its folders (owned by {owner})")
    same = " (the jobs' own user)" if report.owner == report.uid else ""
    return warn("argus-state", f"jobs can write argus's own state: as uid {report.uid} the probe made (and removed) "
                               f"a file in {', '.join(written)}; .argus is owned by {owner}{same}. Any job can then "
                               "garble or delete argus's records, queue, lease and audit log: argus takes none of "
                               "them on trust (docs/shared-root.md), but only Unix permissions keep them argus's. "
                               "To prevent it, run Ray's nodes (and so every job) as a Unix user other than "
                               "argus's, and give .argus to argus's user alone (`chown -R ARGUS_USER "
                               "<root>/.argus && chmod -R go-w <root>/.argus`); jobs/ and outputs/ stay writable "
                               "to the jobs' user")


def _clock(result: ProbeResult) -> list[Check]:
    head, node = head_skew(result), node_skew(result)
    if head is None:
        return []
    text = _agrees("the head's clock", head, "within the submit's round trip")
    if node is not None:
        text += "; " + _agrees("the node's", node, "to the second")
    if max(abs(head), abs(node or 0.0)) > SKEW_WARN:
        return [warn("clock", f"{text}. Deadlines (max_runtime) and alerts move by as much: keep the clocks of "
                              "argus's machine and every node in sync (NTP: chrony or systemd-timesyncd)")]
    return [ok("clock", text)]


def _agrees(who: str, seconds: float, precision: str) -> str:
    if seconds == 0:
        return f"{who} agrees with argus's ({precision})"
    return f"{who} is {abs(seconds):.1f}s {'ahead of' if seconds > 0 else 'behind'} argus's"


def head_skew(result: ProbeResult) -> float | None:
    """Seconds the head's clock is ahead of argus's (negative: behind), from Ray's start_time of the probe,
    which the head stamps while argus's submit is under way; 0 when it falls within the submit."""
    if result.head_start_ms is None or not result.submitted:
        return None
    return _outside(result.head_start_ms / 1000, *result.submitted_between)


def node_skew(result: ProbeResult) -> float | None:
    """As head_skew for the node the probe ran on: its clock (whole seconds) against the probe's life."""
    if result.report.clock is None or not result.ended_at:
        return None
    return _outside(float(result.report.clock), result.submitted_between[0] - 1.0, result.ended_at + 1.0)


def _outside(value: float, low: float, high: float) -> float:
    return value - low if value < low else value - high if value > high else 0.0


def _cleanup(result: ProbeResult) -> list[Check]:
    if result.left:
        return [warn("cleanup", "the probe could not remove everything it made: " + "; ".join(result.left))]
    if not result.submitted:
        return []
    return [ok("cleanup", f"the probe {result.submission_id} is deleted from Ray's table and its files removed")]


def _node_name(node_id: str | None, nodes: tuple[Node, ...]) -> str:
    node = next((n for n in nodes if n.node_id == node_id), None)
    if node is None:
        return f"node {node_id[:12]}" if node_id else "an unknown node"
    return f"{'the head' if node.is_head else 'worker'} {node.ip or node.node_id[:12]}"
