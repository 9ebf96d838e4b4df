"""`after:` on the real test cluster under `argus serve`: the pipeline example runs in order, a failed
predecessor blocks its follower until a retry succeeds, a cycle is a plan error, and files any job can
write on the shared root neither release a follower early nor change what it binds to."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from tests.support.cluster import jobs_of, sdk, until, wait_for
from tests.support.loops import runs_of, serve, stopped
from tests.support.workspace import Workspace, make_workspace

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pipeline"
INTERVAL = 2.0
ONE_TURN = 2 * INTERVAL + 12  # a turn starts within an interval; Ray notices the end, argus plans and submits
TRAIN = "entrypoint: [python3, -m, pipeline_train, '--data=${shared_root}/outputs/data/points.csv']"
FAILS_ONCE = ('entrypoint: "test -e ${shared_root}/failed-once || { touch ${shared_root}/failed-once; '
              'echo train: failing once on purpose; exit 1; }; '
              'python3 -m pipeline_train --data=${shared_root}/outputs/data/points.csv"')


def _example(tmp_path: Path, address: str) -> Workspace:
    """The example, copied, on the test cluster, its code where its cluster's PYTHONPATH looks, and its train
    failing its first attempt, with no retry policy yet."""
    root = tmp_path / "pipeline"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".shared"))
    (root / "argus.yaml").write_text((root / "argus.yaml").read_text().replace("name: pipeline", "name: pipe-ex"))
    cluster = root / "cluster.yaml"
    cluster.write_text(cluster.read_text().replace("http://127.0.0.1:8265", address))
    code = root / ".shared" / "user" / "code"
    code.mkdir(parents=True)
    for script in (root / "code").glob("*.py"):
        shutil.copy(script, code)
    jobs = root / "jobs" / "pipeline.yaml"
    assert TRAIN in jobs.read_text()
    jobs.write_text(jobs.read_text().replace(TRAIN, FAILS_ONCE))
    return Workspace(root, "pipe-ex", address)


def _started(address: str, submission_id: str) -> float:
    return sdk(address).get_job_info(submission_id).start_time / 1000


def _ended(address: str, submission_id: str) -> float:
    return sdk(address).get_job_info(submission_id).end_time / 1000


def test_the_pipeline_example_waits_is_blocked_and_released_under_serve(tmp_path, argus, ray_cluster, hook):
    url, events = hook
    ws, address = _example(tmp_path, ray_cluster.address), ray_cluster.address
    applied = argus("apply", ws.root, "--auto-approve")
    assert applied.code == 0, applied.out + applied.err
    assert "job.train" in applied.out and "waits for job.prepare to succeed" in applied.out
    [prepare] = runs_of(ws, "prepare")
    assert runs_of(ws, "train") == runs_of(ws, "eval") == []  # apply submits only the head of the chain
    loop = serve(ws, "--interval", str(INTERVAL), "--notify", url)
    try:
        wait_for(address, prepare, {"SUCCEEDED"})
        [failing] = until(lambda: runs_of(ws, "train"), "train released after prepare", 30)
        assert 0 <= _started(address, failing) - _ended(address, prepare) < ONE_TURN
        wait_for(address, failing, {"FAILED"})
        until(lambda: any(e["kind"] == "blocked" for e in events), "eval blocked by train's failure", 30)
        status = argus("status", ws.root, "--format", "json")
        [row] = [r for r in json.loads(status.out)["jobs"] if r["address"] == "job.eval"]
        assert row["sync"] == "blocked" and row["waiting_on"][0]["submission_id"] == failing
        time.sleep(2 * INTERVAL)  # two more turns of the loop: still blocked, never submitted
        assert runs_of(ws, "eval") == []

        jobs = ws.root / "jobs" / "pipeline.yaml"  # a retry policy (outside the spec hash) releases the block
        jobs.write_text(jobs.read_text().replace("after: [prepare]", "after: [prepare]\nretry: {on: [unknown], "
                                                                     "max_attempts: 2}"))
        second = until(lambda: [s for s in runs_of(ws, "train") if s != failing], "train retried", 30)[0]
        assert runs_of(ws, "eval") == []  # not before the retry has succeeded
        wait_for(address, second, {"SUCCEEDED"})
        [evaluation] = until(lambda: runs_of(ws, "eval"), "eval released after train's retry", 30)
        assert 0 <= _started(address, evaluation) - _ended(address, second) < ONE_TURN
        wait_for(address, evaluation, {"SUCCEEDED"})
        until(lambda: sum(e["kind"] == "released" for e in events) == 2, "the released events", 30)
    finally:
        code, err = stopped(loop)
    assert code == 0, err
    shared = ws.root / ".shared"
    outputs = shared / "outputs" / ws.name  # each team's own (specs.workloads.verl.outputs_dir)
    report = json.loads((outputs / "checkpoints" / "eval" / "run-1" / "report.json").read_text())
    assert report["model"] == f"{outputs}/checkpoints/train/run-1/model.json"
    assert report["trained_by"] == second and abs(report["a"] - 3) < 0.1 and report["mse"] < 0.1
    record = json.loads((shared / "jobs" / evaluation / "status.json").read_text())
    assert record["bindings"]["${job:train.submission_id}"] == second
    kinds = [e["kind"] for e in events]
    assert kinds.count("blocked") == 1 and kinds.count("released") == 2
    [released] = [e for e in events if e["kind"] == "released" and e["job"] == "eval"]
    assert released["submission_id"] == evaluation and second in released["summary"]
    assert sorted(runs_of(ws, "train")) == sorted([failing, second]) and runs_of(ws, "eval") == [evaluation]


def test_a_cycle_is_a_plan_error_at_its_line(tmp_path, argus, ray_cluster):
    ws = make_workspace(tmp_path / "ws", "pipe-cycle", ray_cluster.address)
    ws.job("a", "echo a", extra="after: [b]\n")
    ws.job("b", "echo b", extra="after: [a]\n")
    result = argus("plan", ws.root)
    assert result.code == 1 and "jobs/a.yaml:6" in result.err and "a -> b -> a" in result.err, result.err
    assert jobs_of(ray_cluster.address, "pipe-cycle") == []


def test_files_on_the_shared_root_neither_release_a_follower_nor_change_its_bindings(workspace, argus):
    """Any job can write under the shared root: a forged record and exit.json of the running predecessor (and
    of an attempt that never ran) say it succeeded; the follower still waits for Ray's word, then binds to
    the predecessor's real run and checkpoint directory."""
    go = workspace.shared / "go"
    waits = f"import os, time; any(os.path.exists({str(go)!r}) or time.sleep(0.2) for _ in iter(int, 1))"
    workspace.job("prepare", ["python3", "-c", waits])
    workspace.job("train", "echo bound ${job:prepare.submission_id} ${job:prepare.checkpoint_dir}",
                  extra="after: [prepare]\n")
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    [prepare] = runs_of(workspace, "prepare")
    wait_for(workspace.address, prepare, {"RUNNING"})
    record = workspace.shared / "jobs" / prepare / "status.json"
    forged = {**json.loads(record.read_text()), "status": "SUCCEEDED",
              "bindings": {"${job:prepare.checkpoint_dir}": "/tmp/evil"}}
    record.write_text(json.dumps(forged))
    (record.parent / "exit.json").write_text('{"exit_code": 0, "signal": null, "signalled": false, '
                                             '"ended_at": "2026-01-01T00:00:00Z"}')
    later = prepare[:-1] + "2"
    (workspace.shared / "jobs" / later).mkdir()
    (workspace.shared / "jobs" / later / "status.json").write_text(json.dumps({**forged, "submission_id": later,
                                                                                "attempt": 2}))
    for _ in range(2):
        assert argus("serve", workspace.root, "--once").code == 0
    assert runs_of(workspace, "train") == []  # the effect: never submitted while Ray says prepare runs

    go.write_text("")
    wait_for(workspace.address, prepare, {"SUCCEEDED"})
    assert argus("serve", workspace.root, "--once").code == 0
    [train] = runs_of(workspace, "train")
    wait_for(workspace.address, train, {"SUCCEEDED"})
    log = (workspace.shared / "jobs" / train / "logs" / "driver.log").read_text()
    assert f"bound {prepare} {workspace.shared}/outputs/{workspace.name}/checkpoints/prepare/run-1" in log
    assert "evil" not in log
