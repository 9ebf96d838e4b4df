"""The serve process's window of GPU samples (reconcile.serve.gpu_window): bounded in time and in count, an
unknown moment is a gap and never a 0, and runs that ended are forgotten after the window."""

from __future__ import annotations

from reconcile.serve.gpu_window import GpuWindows
from state.ray.gpus import ClusterGpus, Gpu, RunGpus


def _use(util: float | None, problem: str = "") -> dict[str, ClusterGpus]:
    gpu = Gpu(node_id="ab", index=0, name="H20", utilization=util, memory_used=1, memory_total=2, pids=frozenset({7}))
    run = RunGpus(submission_id="r1", workspace="w", job="j", gpus=(gpu,))
    return {"c": ClusterGpus("c", problem=problem) if problem else ClusterGpus("c", gpus=(gpu,), runs={"r1": run})}


def test_samples_stay_within_the_window_and_the_count():
    windows = GpuWindows(window=100.0, max_samples=5)
    for t in range(20):
        history = windows.add(_use(float(t)), now=1000.0 + t * 10)
    assert [v for _, v in history.runs["r1"]] == [15.0, 16.0, 17.0, 18.0, 19.0]  # the count bound
    windows = GpuWindows(window=25.0, max_samples=100)
    for t in range(10):
        history = windows.add(_use(50.0), now=1000.0 + t * 10)
    assert [at for at, _ in history.runs["r1"]] == [1070.0, 1080.0, 1090.0]  # the time bound
    assert [s.busy for s in history.clusters["c"]] == [1, 1, 1]


def test_an_unknown_read_is_a_gap_not_an_idle_sample_and_ended_runs_are_forgotten():
    windows = GpuWindows(window=60.0)
    windows.add(_use(90.0), now=1000.0)
    history = windows.add(_use(None), now=1010.0)
    assert history.runs["r1"] == ((1000.0, 90.0),)
    history = windows.add(_use(None, problem="the dashboard answered 404"), now=1020.0)
    assert history.runs["r1"] == ((1000.0, 90.0),) and len(history.clusters["c"]) == 2
    history = windows.add({}, now=1100.0)
    assert history.runs == {} and history.clusters == {}
