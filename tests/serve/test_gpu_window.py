"""The serve process's window of GPU samples (reconcile.serve.gpu_window): bounded in time and in count, an
unknown moment is a gap and never a 0, and runs that ended are forgotten after the window."""

from __future__ import annotations

from reconcile.plan.health import idle
from reconcile.serve.gpu_window import GpuWindows
from specs.kinds.health import IdlePolicy
from state.ray.gpus import ClusterGpus, Gpu, RunGpus


def _use(util: float | None, problem: str = "") -> dict[str, ClusterGpus]:
    gpu = Gpu(node_id="ab", index=0, name="H20", utilization=util, memory_used=1, memory_total=2, pids=frozenset({7}))
    run = RunGpus(submission_id="r1", workspace="w", job="j", gpus=(gpu,))
    return {"c": ClusterGpus("c", problem=problem) if problem else ClusterGpus("c", gpus=(gpu,), runs={"r1": run})}


def test_samples_cover_the_window_and_stay_within_the_count():
    windows = GpuWindows(window=25.0, max_samples=100)
    for t in range(10):
        history = windows.add(_use(5.0), now=1000.0 + t * 10)
    assert [at for at, _ in history.runs["r1"]] == [1060.0, 1070.0, 1080.0, 1090.0]  # and the one before the window
    assert [s.busy for s in history.clusters["c"]] == [1, 1, 1, 1]
    policy = IdlePolicy(below_percent=10, window=25)
    assert idle(history.runs["r1"], 1090.0, policy)  # the detector sees its window covered
    windows = GpuWindows(window=1000.0, max_samples=8)
    for t in range(200):
        history = windows.add(_use(float(t)), now=1000.0 + t)
    kept = history.runs["r1"]
    assert len(kept) <= 8 and kept[0][0] == 1000.0 and kept[-1] == (1199.0, 199.0)  # thinned, still covering


def test_an_unknown_read_is_a_gap_not_an_idle_sample_and_ended_runs_are_forgotten():
    windows = GpuWindows(window=60.0)
    windows.add(_use(90.0), now=1000.0)
    history = windows.add(_use(None), now=1010.0)
    assert history.runs["r1"] == ((1000.0, 90.0),)
    history = windows.add(_use(None, problem="the dashboard answered 404"), now=1020.0)
    assert history.runs["r1"] == ((1000.0, 90.0),) and len(history.clusters["c"]) == 2
    history = windows.add({}, now=1100.0)
    assert history.runs == {} and history.clusters == {}


def test_the_window_kept_covers_the_longest_idle_policy_the_spec_accepts():
    import pytest
    from pydantic import ValidationError

    from reconcile.serve.gpu_window import WINDOW
    from specs.kinds.health import MAX_IDLE_WINDOW, IdlePolicy

    assert WINDOW >= MAX_IDLE_WINDOW  # else an accepted `for:` could never be covered, and never fire
    with pytest.raises(ValidationError):
        IdlePolicy.model_validate({"for": "3h"})
