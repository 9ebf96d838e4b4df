"""GPU use as shown (reconcile.views.gpu): the status cell, and the page's drawn timelines, whose text comes from
hostile places (a GPU's name from the node, a job's name from a spec) and is escaped."""

from __future__ import annotations

from types import SimpleNamespace

from reconcile.serve.gpu_window import GpuHistory
from reconcile.views.gpu import cell, section, sparkline
from state.ray.gpus import MIB, ClusterGpus, Gpu, RunGpus


def _gpu(index: int, util: float | None) -> Gpu:
    return Gpu(node_id="ab", index=index, name="<script>", utilization=util, memory_used=31 * 1024 * MIB,
               memory_total=80 * 1024 * MIB, pids=frozenset({7}))


def test_the_cell_says_count_use_and_memory_and_unknown_as_unknown():
    run = RunGpus(submission_id="r", workspace="w", job="j", gpus=(_gpu(0, 90), _gpu(1, 84)))
    assert cell(run) == "2 GPU 87% 62/160 GiB"
    assert cell(RunGpus(submission_id="r", workspace="w", job="j", gpus=(_gpu(0, None),))) == "1 GPU ?% 31/80 GiB"
    assert cell(RunGpus(submission_id="r", workspace="w", job="j", gpus=())) == "0 GPU"


def test_a_sparkline_is_drawn_within_its_box_whatever_the_values():
    svg = sparkline([(0.0, -50.0), (10.0, 50.0), (20.0, 1e9)], 'run "x" <b>')
    points = [tuple(map(float, p.split(","))) for p in svg.split('points="')[1].split('"')[0].split()]
    assert [round(y, 1) for _, y in points] == [27.0, 14.0, 1.0] and points[-1][0] == 160.0
    assert "<b>" not in svg and "&lt;b&gt;" in svg
    assert "points" in sparkline([(5.0, 40.0)], "one") and "no samples" in sparkline([], "none")


def test_the_page_section_escapes_what_the_cluster_and_specs_say():
    run = RunGpus(submission_id="w.j<i>.1", workspace="w", job="j<i>", gpus=(_gpu(0, 50),))
    report = SimpleNamespace(workspace="w", gpus_held={"c": {"w": 2.0}}, gpu_use={
        "c": ClusterGpus("c", gpus=(_gpu(0, 50),), runs={"w.j<i>.1": run}),
        "down": ClusterGpus("down", problem="<img src=x>")},
        gpu_history=GpuHistory(runs={"w.j<i>.1": ((1.0, 50.0), (2.0, 60.0))}, clusters={}))
    html = section(report)
    assert "<i>" not in html and "<img" not in html and "&lt;img src=x&gt;" in html
    assert html.count("<svg") == 1 and "no samples yet" in html  # the cluster's own has no sample yet
    assert "1 of 1" in html and "unknown" in html


def test_a_timeline_shows_the_last_half_hour_of_the_longer_window_serve_keeps():
    svg = sparkline([(0.0, 10.0), (5000.0, 20.0), (5100.0, 30.0)], "run")
    assert len(svg.split('points="')[1].split('"')[0].split()) == 2
