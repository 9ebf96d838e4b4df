"""`argus serve`: turns every interval while this process holds the workspace's lease.

A keeper thread renews the lease (every third of an interval, whatever a turn is doing), so a long
apply does not look like a dead loop; a standby takes over within three intervals of the holder's
last renewal. SIGTERM or SIGINT lets the current turn finish, then releases the lease.

Between turns, a watch thread (reconcile.serve.watch) polls each cluster's job list and wakes the loop
when a job ends or room frees, so a queued job starts, and a failure is told, within seconds whatever
the interval. Woken turns are at least MIN_GAP apart: a burst of endings (or a job table that churns
on purpose) leads to one turn, never to a spin.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from reconcile.report import Event, TurnReport
from reconcile.serve.gpu_window import GpuWindows
from reconcile.serve.incidents import Incidents
from reconcile.serve.quiet import Quiet
from reconcile.serve.turn import TurnOptions, turn
from reconcile.serve.watch import EVERY, Watch
from specs.diagnostics import plain

LEASE_TTL_INTERVALS = 2.0
"""The lease dies this many intervals after its last renewal (seen by the standby's own clock); with a
standby checking every third of an interval, it takes over within three intervals."""
MIN_GAP = 1.0
"""Seconds from the end of a turn to a turn the watch woke."""
PAST_DEADLINE = 0.05
"""Seconds after a run's deadline the loop wakes to stop it: its plan must see the deadline passed."""


@dataclass
class LoopSettings:
    turn: TurnOptions
    once: bool = False
    log_format: Literal["text", "json"] = "text"
    notify: Callable[[list[Event]], object] | None = None
    """Sends events, never raises; returns an Outcome (what was delivered, and problems), or a list of
    problems: reconcile.serve.notify."""
    publish: list[Callable[[TurnReport], None]] = field(default_factory=list)
    """Called with every report: the status page, the metrics."""
    watch: float = EVERY
    """Seconds between the watch's polls of each cluster (reconcile.serve.watch); 0: no watch."""
    first_start: bool = False
    """Nothing was ever told of this workspace (its sent-event ledger is empty): the first turn sums up what
    ended before it (reconcile.serve.quiet)."""
    admit: Callable[[object], None] | None = None
    """Given each turn's freshly loaded desired state first; raises ArgusError to refuse the turn (a shared
    serve's secret lists: reconcile.serve.secret_lists)."""


class Loop:
    def __init__(self, directory: Path, shared_root: str, workspace: str, settings: LoopSettings,
                 loaded: object | None = None):
        """`loaded`: the desired state the command read at start-up, reused by the first turn."""
        from state.queue.lease import Lease

        self.directory, self.settings, self.loaded = directory, settings, loaded
        interval = settings.turn.interval
        self.lease = Lease(shared_root, workspace, ttl=LEASE_TTL_INTERVALS * interval, once=settings.once)
        self.last_good: TurnReport | None = None
        self.stopping = threading.Event()
        self.active = threading.Event()
        self.wake = threading.Event()
        self.turns = 0
        self.watch = Watch(settings.watch, self._woken, self.say) if settings.watch > 0 and not settings.once else None
        self._early: str | None = None
        """Why the watch asked for a turn now; None when it did not."""
        self._turn_ended = 0.0
        self._due: float | None = None
        """The next deadline (epoch seconds) of a run the last turn saw active: the loop wakes for it."""
        self.incidents = Incidents(workspace)
        self.gpu = GpuWindows()
        self._gpu_seen = None
        self.quiet = Quiet(workspace, settings.turn.drift_grace,
                           earlier=None if settings.first_start else set(), started=time.time())
        self._sent: list[str] = []
        """This turn's deliveries, `<kind> to <channel>`: what the turn's log line calls sent."""
        self._said: set[str] = set()
        """Warnings about the shared root's signatures already logged: each once, not every turn."""

    def run(self) -> int:
        """Until stopped (or one turn with --once). Returns the exit code: 1 when the last turn failed."""
        previous = self._handle_signals()
        self._warn_unsigned()
        keeper = threading.Thread(target=self._keep_lease, name="argus-lease", daemon=True)
        self._renew()
        self.wake.clear()  # the first turn starts now: taking the lease must not add a second at once
        keeper.start()
        watcher = self._start_watch()
        report = None
        try:
            while not self.stopping.is_set():
                report = self._one()
                if self.settings.once:
                    break
                self._wait()
        finally:
            self.stopping.set()
            keeper.join(timeout=5)
            if watcher is not None:
                watcher.join(timeout=5)
            self._finish_sends()
            self.lease.release()
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            self.say(f"argus serve: stopped after {self.turns} turn(s); lease released")
        return 0 if report is None or report.ok else 1

    def stop(self) -> None:
        """Stop after the current turn (reconcile.serve.loops's signal handler, from another thread)."""
        self.stopping.set()
        self.wake.set()

    def _start_watch(self) -> threading.Thread | None:
        if self.watch is None:
            return None
        thread = threading.Thread(target=self.watch.run, args=(self.stopping, self.active), name="argus-watch",
                                  daemon=True)
        thread.start()
        return thread

    def _woken(self, reason: str) -> None:
        """The watch's call, from its thread: a turn now (one, however many calls come before it starts)."""
        self._early = reason
        self.wake.set()

    def _wait(self) -> None:
        """Until the interval has passed, a run's deadline has, or something wakes the loop (the watch, the
        lease taken, a signal)."""
        wait = self.settings.turn.interval
        if self._due is not None:
            wait = min(wait, max(0.0, self._due - time.time() + PAST_DEADLINE))
        self.wake.wait(wait)
        self.wake.clear()
        if self._early is not None:  # a woken turn waits out the gap: endings that come meanwhile join it
            self.stopping.wait(max(0.0, self._turn_ended + MIN_GAP - time.monotonic()))
            self.wake.clear()

    def _one(self) -> TurnReport:
        early, self._early = self._early, None
        if not self.active.is_set():
            report = self._standby()
        else:
            report = self._with_incidents(self._kept(self._with_gpu_history(self._turn())))
            if early is not None:
                report = replace(report, notes=(*report.notes, f"turn started early: {early}"))
            self._due = next_deadline(report) if report.plan is not None else self._due
            self._notify(report)
            self._say_trust_warnings(report)
            if self.watch is not None:
                self.watch.after_turn(report)
        self._turn_ended = time.monotonic()
        for publish in self.settings.publish:
            publish(report)
        self._log(report)
        return report

    def _turn(self) -> TurnReport:
        self.turns += 1
        try:
            loaded, self.loaded = self.loaded, None
            samples = self._gpu_seen.runs if self._gpu_seen is not None else {}
            report = turn(self.directory, self.settings.turn, self.say, loaded, seen=self._seen, gpu_samples=samples)
            # a turn whose desired state did not load knows only its directory: the loop knows its workspace
            return replace(report, workspace=self.lease.workspace)
        except Exception as err:  # a bug must not end the loop: report it, try again next turn
            self.say(traceback.format_exc().rstrip())
            now = time.time()
            return TurnReport(workspace=self.lease.workspace, started_at=now, finished_at=now, ok=False,
                              interval=self.settings.turn.interval, sync=self.settings.turn.sync,
                              error=f"internal error: {type(err).__name__}: {err}")

    def _with_incidents(self, report: TurnReport) -> TurnReport:
        """The report with what is worth telling of its events (reconcile.serve.quiet), the incidents open
        after it, and the events of those that began or ended."""
        now = time.time()
        blocked = getattr(getattr(self.settings.notify, "__self__", None), "blocked", None)
        told = self.incidents.update(report, now, blocked() if blocked is not None else None)
        for said in told:  # the turn's line lists only their kinds: the log says what began or ended, once
            self.say(f"argus serve: {said.kind}: {said.summary}")
        return replace(report, events=(*self.quiet.told(report.events, now), *told),
                       incidents=self.incidents.current())

    def _seen(self, desired: object) -> None:
        """The turn's desired state, once loaded: admitted first (or the turn refused), then followed by the watch."""
        if self.settings.admit is not None:
            self.settings.admit(desired)
        if self.watch is not None:
            self.watch.follow(desired)

    def _with_gpu_history(self, report: TurnReport) -> TurnReport:
        """The report with the windows of GPU samples (reconcile.serve.gpu_window) this turn's reads added to."""
        self._gpu_seen = self.gpu.add(report.gpu_use, report.finished_at)  # the next turn's idle verdicts read it
        return replace(report, gpu_history=self._gpu_seen)

    def _kept(self, report: TurnReport) -> TurnReport:
        """A turn that failed before it could plan shows the last good turn's jobs and runs: they are
        what people need to see during the incident."""
        if report.plan is not None:
            self.last_good = report
            return report
        if self.last_good is None:
            return report
        good = self.last_good
        return replace(report, plan=good.plan, runs=good.runs, gpus_held=good.gpus_held, queues=good.queues,
                       others=good.others, notes=(*report.notes, "jobs and runs as the last good turn saw them"))

    def _standby(self) -> TurnReport:
        from state.root_key import KEY_VARIABLE, keyed

        now = time.time()
        named = self.lease.holder_now()
        holder = named or "nobody"
        notes = (f"standby: {holder} holds the lease of this workspace",)
        # one look, no key: a lease a job wrote (naming another host) reads as a live holder, every time; a
        # cron of --once would do nothing for ever and say it went well. (Nobody: the lease could not be taken
        # at all, a root not laid out: said as such, and as before.)
        unproven = self.settings.once and not keyed() and named is not None
        if unproven:
            notes += (f"argus serve --once did nothing: without {KEY_VARIABLE} it cannot tell the lease of {holder} "
                      "from one a job wrote; set it for every argus of this shared root (docs/serve.md), or stop "
                      "the loop that holds it",)
        return TurnReport(workspace=self.lease.workspace, started_at=now, finished_at=now, ok=not unproven,
                          interval=self.settings.turn.interval, sync=self.settings.turn.sync, standby=holder,
                          notes=notes)

    def _notify(self, report: TurnReport) -> None:
        self._sent = []
        if self.settings.notify is None:  # called every turn: it also reports sends that ended late
            return
        outcome = self.settings.notify(list(report.events))
        self._sent = [f"{event.kind} to {label}" for label, event in getattr(outcome, "delivered", ())]
        for problem in getattr(outcome, "problems", outcome):
            self.say(f"argus serve: notification: {problem}")

    def _finish_sends(self) -> None:
        """A send still under way is given a few seconds, so its ledger records it and a restarted loop
        does not send it again."""
        wait = getattr(getattr(self.settings.notify, "__self__", None), "wait", None)
        if wait is not None:
            wait(5.0)

    def _keep_lease(self) -> None:
        period = self.settings.turn.interval / 3
        while not self.stopping.wait(period):
            self._renew()

    def _renew(self) -> None:
        was = self.active.is_set()
        try:
            holding = self.lease.try_hold()
        except OSError as err:  # the shared root is gone for a moment: stop acting until it is back
            holding = False
            self.say(f"argus serve: cannot renew the lease at {self.lease.path}: {err}")
        for notice in self.lease.notices():
            self.say(notice)
        if holding and not was:
            self.active.set()
            self.say(f"argus serve: active for workspace {self.lease.workspace} ({self.lease.holder})")
            self.wake.set()
        elif not holding:
            self.active.clear()
            if was:
                self.say(f"argus serve: lost the lease to {self.lease.holder_now()}; standing by")

    def _say_trust_warnings(self, report: TurnReport) -> None:
        """The plan's warnings about unsigned or forged queue entries (reconcile.plan.queue_trust), once each."""
        from reconcile.plan.queue_trust import KEY_WORDS

        for found in report.plan.diagnostics if report.plan is not None else ():
            if found.severity == "warning" and KEY_WORDS in found.message and found.message not in self._said:
                self._said.add(found.message)
                self.say(f"argus serve: warning: {found.address}: {found.text}")

    def _warn_unsigned(self) -> None:
        from state.root_key import keyed

        if not keyed():
            self.say(f"argus serve: ARGUS_ROOT_KEY is not set: the lease, the sent-event ledger and the admission "
                     f"queue on {self.lease.shared_root} are unsigned, so any job can forge them (docs/serve.md)")

    def _handle_signals(self) -> dict:
        """SIGTERM and SIGINT stop the loop after its turn; returns the handlers to put back."""
        if threading.current_thread() is not threading.main_thread():
            return {}

        def stop(signum: int, _frame: object) -> None:
            self.stopping.set()  # first: a print interrupted mid-write must not lose the stop
            self.wake.set()
            with contextlib.suppress(RuntimeError):
                self.say(f"argus serve: {signal.Signals(signum).name}: finishing this turn, then stopping")

        return {signum: signal.signal(signum, stop) for signum in (signal.SIGTERM, signal.SIGINT)}

    def _log(self, report: TurnReport) -> None:
        fields = {**log_fields(report, self.turns), "sent": self._sent if self.active.is_set() else []}
        if self.settings.log_format == "json":
            _emit(json.dumps(fields, sort_keys=True), stamped=False)
        else:
            _emit("argus serve: " + " ".join(f"{k}={v}" for k, v in fields.items()
                                             if v not in (None, [], "") and k != "time"))  # the line starts with it

    def say(self, line: str) -> None:
        """One line of the log (stderr). With --log-format json every line is one JSON object, whatever
        the message holds (an apply's multi-line error, a dashboard's text): {"message": ...}."""
        if self.settings.log_format == "json":
            _emit(json.dumps({"message": plain(line), "workspace": self.lease.workspace,
                              "time": datetime.now(timezone.utc).isoformat(timespec="seconds")}, sort_keys=True),
                  stamped=False)
        else:
            _emit(plain(line))


def next_deadline(report: TurnReport) -> float | None:
    """The earliest deadline of a run the turn left running that falls after the turn's plan was made: one the
    plan saw passed was the turn's to stop (a stop that failed waits for the next turn, never a spin)."""
    from reconcile.model import Action

    ahead = [c.deadline_at for c in report.plan.changes if c.deadline_at is not None and c.action is not Action.DEADLINE
             and c.deadline_at > report.started_at] if report.plan is not None else []
    return min(ahead, default=None)


def _emit(line: str, stamped: bool = True) -> None:
    """One line of the log on stderr; a text line starts with the time (UTC, to the second), as log lines do."""
    if stamped:
        line = f"{datetime.now(timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')} {line}"
    print(line, file=sys.stderr, flush=True)


def log_fields(report: TurnReport, turns: int) -> dict[str, object]:
    """The one structured line per turn."""
    return {"time": datetime.fromtimestamp(report.finished_at, tz=timezone.utc).isoformat(timespec="seconds"),
            "turn": turns, "workspace": report.workspace, "ok": report.ok,
            "duration_s": round(report.finished_at - report.started_at, 3), "commit": (report.commit or "")[:12],
            "jobs": len(report.runs), "applied": list(report.applied), "retried": list(report.retried),
            "drift": report.drift, "events": [e.kind for e in report.events],
            "error": plain(report.error, lines=False) if report.error else report.error,
            "notes": [plain(note, lines=False) for note in report.notes]}
