"""`argus serve DIR DIR ...`: several workspaces' loops in one process, one thread each.

Each workspace keeps its own Loop and lease (reconcile.serve.loop), so a team can still run its own
loop elsewhere: whichever process holds a workspace's lease acts for it, the other stands by for it.
One signal handler in the main thread stops them all (each finishes its turn and releases its lease).
A loop that raises out of its run (a bug: turns already catch their own errors) is logged with its
traceback, told to `crashed` (the status page's /healthz then names it, 503) and makes the exit code
1; the others go on, as they hold other workspaces' leases and have no reason to stop.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Sequence

from reconcile.serve.loop import Loop

JOIN_TICK = 0.5
"""The main thread joins the loops in ticks this long, so it is free to run the signal handler."""


def run_all(loops: Sequence[Loop], crashed: Callable[[str, str], None] | None = None) -> int:
    """Every loop until stopped (each one turn with --once); the highest exit code of them (1: a loop
    whose last turn failed, or that crashed). A single loop runs in this thread, as it always has."""
    if len(loops) == 1:
        return loops[0].run()
    codes: dict[str, int] = {}
    threads = [threading.Thread(target=_guarded, args=(loop, codes, crashed), daemon=True,
                                name=f"argus-loop-{loop.lease.workspace}") for loop in loops]
    previous = _handle_signals(loops)
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():
                thread.join(JOIN_TICK)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return max(codes.values(), default=0)


def _guarded(loop: Loop, codes: dict[str, int], crashed: Callable[[str, str], None] | None) -> None:
    workspace = loop.lease.workspace
    try:
        codes[workspace] = loop.run()
    except BaseException as err:  # noqa: BLE001 -- one workspace's bug must not pass unseen, nor stop the others
        codes[workspace] = 1
        reason = f"{type(err).__name__}: {err}"
        print(traceback.format_exc().rstrip(), file=sys.stderr, flush=True)
        loop.say(f"argus serve: the loop of workspace {workspace} crashed ({reason}); its lease is released, "
                 "the other workspaces' loops go on")
        if crashed is not None:
            crashed(workspace, reason)


def _handle_signals(loops: Sequence[Loop]) -> dict:
    """SIGTERM and SIGINT stop every loop after its turn; returns the handlers to put back."""
    if threading.current_thread() is not threading.main_thread():
        return {}

    def stop(signum: int, _frame: object) -> None:
        for loop in loops:  # first: a print interrupted mid-write must not lose the stop
            loop.stop()
        with contextlib.suppress(RuntimeError):
            loops[0].say(f"argus serve: {signal.Signals(signum).name}: finishing each workspace's turn, then stopping")

    return {signum: signal.signal(signum, stop) for signum in (signal.SIGTERM, signal.SIGINT)}
