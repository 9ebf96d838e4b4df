"""What Ray's job server answers to submit, stop and delete (python/ray/dashboard/modules/job/job_head.py):
`JobSubmitResponse` {"job_id": str | null, "submission_id": str}, `JobStopResponse` {"stopped": bool},
`JobDeleteResponse` {"deleted": bool}, each with status 200. A 200 of any other shape is not taken as
success: a proxy's login page or a hostile dashboard answering 200 must not make argus record a job as
submitted, stopped or deleted."""

from __future__ import annotations

from typing import Any


class WrongAnswer(ValueError):
    """A 200 whose body is not what Ray's job server sends for that request."""


def submitted(body: Any, asked: str | None) -> str:
    """The submission id Ray took; it must be the one argus asked for."""
    got = body.get("submission_id") if isinstance(body, dict) else None
    if not isinstance(got, str) or (asked is not None and got != asked):
        raise WrongAnswer(f"the dashboard answered the submit of {asked!r} with {_shown(body)}, not Ray's "
                          f"{{\"submission_id\": {asked!r}}}: the job is not known to be submitted")
    return got


def flag(body: Any, key: str, what: str) -> bool:
    """Stop's {"stopped": bool} or delete's {"deleted": bool}."""
    value = body.get(key) if isinstance(body, dict) else None
    if not isinstance(value, bool):
        raise WrongAnswer(f"the dashboard answered the {what} with {_shown(body)}, not Ray's {{\"{key}\": true|false}}")
    return value


def _shown(body: Any) -> str:
    text = repr(body)
    return text if len(text) <= 120 else text[:117] + "..."


def keep_alive(sock: Any) -> None:
    """TCP keepalive on the log websocket's socket: a head that vanished (power, network) is found by the
    kernel within about a minute even while argus waits on a read; best effort where options are missing."""
    import socket

    if sock is None:
        return
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (("TCP_KEEPIDLE", 30), ("TCP_KEEPINTVL", 10), ("TCP_KEEPCNT", 3)):
        if hasattr(socket, name):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)
