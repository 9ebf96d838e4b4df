"""The reading of a run's progress from its log's tail: verl's console lines, verl's tqdm bar, argus's convention,
and logs any job can write (huge lines, binary, forged numbers)."""

from __future__ import annotations

import time

import pytest

from specs.workloads.run_progress import MAX_STEP, Progress, estimate, rate_of, read_tail

VERL = ("(TaskRunner pid=4242) step:{n} - actor/entropy:0.53 - actor/pg_loss:-0.012 - critic/score/mean:0.41 - "
        "timing_s/gen:12.5 - timing_s/step:{t} - perf/throughput:1234.5")


def test_verl_console_lines_give_the_newest_step_and_its_step_time() -> None:
    text = "\n".join(VERL.format(n=n, t=40.0 + n) for n in (1, 2, 3)) + "\nvalidation done\n"
    reading = read_tail(text)
    assert reading is not None and (reading.step, reading.source, reading.step_seconds) == (3, "verl", 43.0)


def test_a_bare_verl_line_without_the_ray_prefix_is_read() -> None:
    reading = read_tail("step:12 - actor/entropy:0.53\n")
    assert reading is not None and reading.step == 12 and reading.step_seconds is None


def test_verls_tqdm_bar_gives_the_total_when_the_spec_gives_none() -> None:
    text = ("(TaskRunner pid=1) Training Progress:   3%|▎         | 3/100 [02:03<1:06:21, 41.0s/it]\r"
            "(TaskRunner pid=1) Training Progress:   4%|▍         | 4/100 [02:44<1:05:40, 41.0s/it]\n"
            + VERL.format(n=4, t=41.0))
    reading = read_tail(text)
    assert reading is not None and (reading.step, reading.total) == (4, 100)


@pytest.mark.parametrize("line", ["global_step:12 - x:1", "timing_s/step:3.0", "mystep:5 - a:1", "step:12abc - a:1",
                                  "step: 12 - a:1", "step:-3 - a:1"])
def test_what_only_looks_like_a_step_is_no_step(line: str) -> None:
    assert read_tail(line + "\n") is None


def test_the_convention_gives_step_total_checkpoint_and_a_rate_from_its_times() -> None:
    text = ("loading...\nargus:progress step=10 total=50 time=1000.0\nnoise\n"
            "[rank0] argus:progress step=14 total=50 checkpoint=10 time=1020.0\n")
    reading = read_tail(text)
    assert reading is not None
    assert (reading.step, reading.total, reading.checkpoint, reading.source) == (14, 50, 10, "argus")
    progress = estimate(reading, None, [], now=2000.0)
    assert progress.rate == pytest.approx(0.2) and progress.eta_seconds == pytest.approx(180.0)
    assert progress.fraction == pytest.approx(0.28)


def test_the_specs_total_wins_over_the_logs() -> None:
    reading = read_tail("argus:progress step=5 total=999\n")
    assert reading is not None and estimate(reading, 10, [], now=1.0).total == 10


def test_the_rate_comes_from_this_processs_samples_first_sightings() -> None:
    samples = [(100.0, 1), (130.0, 1), (160.0, 3), (190.0, 3), (200.0, 4)]
    assert rate_of(samples) == pytest.approx(3 / 100)
    assert rate_of([(1.0, 5), (2.0, 5)]) is None and rate_of([]) is None
    reading = read_tail(VERL.format(n=4, t=10.0))
    assert reading is not None
    progress = estimate(reading, 104, samples, now=200.0)
    assert progress.rate == pytest.approx(0.03) and progress.eta_seconds == pytest.approx(100 / 0.03)


def test_verls_step_time_gives_a_rate_without_history() -> None:
    reading = read_tail(VERL.format(n=20, t=30.0))
    assert reading is not None
    progress = estimate(reading, 100, [], now=1.0)
    assert progress.rate == pytest.approx(1 / 30) and progress.eta_seconds == pytest.approx(80 * 30)


def test_a_forged_huge_step_is_no_step_and_an_older_honest_line_is_not_taken_for_it() -> None:
    assert read_tail("step:" + "9" * 40 + " - a:1\n") is None
    assert read_tail(f"step:{MAX_STEP + 1} - a:1\n") is None
    assert read_tail("argus:progress step=" + "9" * 5000 + " total=1\n") is None
    reading = read_tail(f"argus:progress step=3 total={10**30} checkpoint={10**30}\n")
    assert reading is not None and reading.total is None and reading.checkpoint is None


def test_forged_times_and_step_times_never_make_an_infinite_or_negative_eta() -> None:
    for text in ("step:5 - timing_s/step:0.0", "step:5 - timing_s/step:1e999", "step:5 - timing_s/step:nan",
                 "argus:progress step=5 total=10 time=1e308\nargus:progress step=6 total=10 time=1e308",
                 "argus:progress step=6 total=10 time=5\nargus:progress step=5 total=10 time=9"):
        reading = read_tail(text)
        assert reading is not None
        progress = estimate(reading, 10, [], now=1.0)
        assert progress.eta_seconds is None or 0 <= progress.eta_seconds < 1e9, text


def test_a_huge_line_and_binary_garbage_are_read_in_linear_time() -> None:
    hostile = ("step:" * 200_000 + "\n" + "| " * 100_000 + "Training Progress" + "|" + " " * 100_000 + "\n"
               + "\x00\xff\ufffd" * 50_000 + "argus:progress " + "step=1 " * 100_000)
    started = time.perf_counter()
    reading = read_tail(hostile)
    assert time.perf_counter() - started < 2.0
    assert reading is not None and reading.step == 1  # the convention's first 8 fields: step=1


def test_a_step_past_the_total_shows_done_not_a_negative_eta() -> None:
    reading = read_tail("argus:progress step=11 total=10 time=4\nargus:progress step=12 total=10 time=5\n")
    assert reading is not None
    progress = estimate(reading, None, [], now=9.0)
    assert progress.fraction == 1.0 and progress.eta_seconds == 0.0


def test_a_progress_is_frozen_and_refuses_forged_values() -> None:
    with pytest.raises(ValueError):
        Progress(step=-1, seen_at=0.0)
    with pytest.raises(ValueError):
        Progress(step=1, rate=float("inf"), seen_at=0.0)
