"""Progress of real runs on the test's Ray cluster: a command job printing verl's console lines (and its tqdm
bar's total), and a trainer-less command job using argus's convention. `argus status` shows step of total and an
ETA, /metrics exports argus_run_step, argus_run_steps_total and argus_run_eta_seconds, the page draws a bar."""

from __future__ import annotations

import json
import re
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from state.runs.records import read_record
from tests.support.cluster import until, wait_for
from tests.support.loops import listening, runs_of, serve, stopped
from tests.support.status_page import browse_url

# verl's LocalLogger line, as a Ray actor's output reaches the driver log, and its trainer's tqdm bar.
VERL_LIKE = ("import time, sys\n"
             "for n in range(1, 601):\n"
             "    sys.stderr.write(f'(TaskRunner pid=77) Training Progress:   0%|   | {n}/600 [00:01<10:00]\\r')\n"
             "    print(f'(TaskRunner pid=77) step:{n} - actor/entropy:0.53 - actor/pg_loss:-0.01 - '\n"
             "          f'timing_s/gen:0.2 - timing_s/step:2.0 - perf/throughput:123.4', flush=True)\n"
             "    time.sleep(2)\n")
CONVENTION = ("import time\n"
              "for n in range(1, 301):\n"
              "    print(f'argus:progress step={n} total=300 time={time.time():.3f}', flush=True)\n"
              "    time.sleep(1)\n")


def test_status_metrics_and_page_show_step_total_and_eta_of_running_jobs(workspace, argus, tmp_path):
    # one line each: YAML folds a quoted scalar's newlines into spaces
    workspace.job("verl-like", ["python3", "-u", "-c", f"exec({VERL_LIKE!r})"])
    workspace.job("counter", ["python3", "-u", "-c", f"exec({CONVENTION!r})"])
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    [verl_run], [counter_run] = runs_of(workspace, "verl-like"), runs_of(workspace, "counter")
    for run in (verl_run, counter_run):
        wait_for(workspace.address, run, {"RUNNING"})
        log = workspace.shared / "jobs" / run / "logs" / "driver.log"
        until(lambda log=log: log.exists() and _steps_in(log.read_text()) >= 3, f"{run} reported steps", 180)

    status = argus("status", workspace.root)
    assert status.code == 0, status.err
    rows = {line.split()[0]: line for line in status.out.splitlines() if line.startswith("job.")}
    assert "PROGRESS" in status.out.splitlines()[0]
    assert re.search(r"\b\d+/600 \(\d+%\) eta \d+m\d\ds", rows["job.verl-like"]), rows["job.verl-like"]
    assert re.search(r"\b\d+/300 \(\d+%\) eta \d+m\d\ds", rows["job.counter"]), rows["job.counter"]

    shown = json.loads(argus("status", workspace.root, "--format", "json").out)
    progress = {row["address"]: row.get("progress") for row in shown["jobs"]}
    assert progress["job.counter"]["total"] == 300 and progress["job.counter"]["source"] == "argus"
    assert progress["job.verl-like"]["step"] >= 3 and progress["job.verl-like"]["source"] == "verl"

    loop = serve(workspace, "--interval", "2", "--listen", "127.0.0.1:0")
    try:
        site = listening(loop)
        ws = ("workspace", workspace.name)
        step = ("argus_run_step", (("job", "counter"), ("submission_id", counter_run), ws))
        until(lambda: _metrics(site).get(step), "argus_run_step of the counter", 180)
        samples = _metrics(site)
        verl_labels = (("job", "verl-like"), ("submission_id", verl_run), ws)
        assert samples[("argus_run_step", verl_labels)] >= 3
        assert samples[("argus_run_steps_total", verl_labels)] == 600
        assert 0 < samples[("argus_run_eta_seconds", verl_labels)] <= 600 * 2.0
        counter_labels = (("job", "counter"), ("submission_id", counter_run), ws)
        assert samples[("argus_run_steps_total", counter_labels)] == 300
        assert 0 < samples[("argus_run_eta_seconds", counter_labels)] <= 300 * 1.5
        page = browse_url(tmp_path, site)
    finally:
        code, err = stopped(loop)
    assert code == 0, err
    # the turn that saw the runs RUNNING rewrote their records (they were PENDING): with the step it read
    for run in (verl_run, counter_run):
        record = read_record(str(workspace.shared), run)
        assert record is not None and record.progress is not None and record.progress.step >= 3, record
    bars = re.findall(r'<progress value="(\d+)" max="(\d+)"', page)
    assert {total for _value, total in bars} == {"600", "300"}, page[-3000:]


def _steps_in(log: str) -> int:
    """Step lines printed whole: verl's (one timing_s/step each) and the convention's."""
    return log.count("timing_s/step:") + log.count("argus:progress step=")


def _metrics(site: str) -> dict:
    text = urllib.request.urlopen(f"{site}metrics", timeout=10).read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}
