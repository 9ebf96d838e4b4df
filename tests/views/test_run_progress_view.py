"""A run's progress as `argus status`, its JSON and the page show it."""

from __future__ import annotations

from reconcile.views.run_progress import duration, progress_html, progress_text
from specs.workloads.run_progress import Progress


def test_the_text_says_step_of_total_percent_eta_and_checkpoint() -> None:
    seen = Progress(step=12, total=100, rate=0.0236, eta_seconds=3720.0, checkpoint_step=10, seen_at=1.0)
    assert progress_text(seen) == "12/100 (12%) eta 1h02m ckpt 10"
    assert progress_text(seen, running=False) == "12/100 (12%) ckpt 10", "an ended run's ETA means nothing"
    assert progress_text(Progress(step=7, seen_at=1.0)) == "7/?"
    assert progress_text(None) == "-"


def test_durations_show_two_units_at_most() -> None:
    assert [duration(s) for s in (42, 307, 3720, 3 * 86400 + 4 * 3600 + 59)] == ["42s", "5m07s", "1h02m", "3d04h"]


def test_the_page_draws_a_bar_with_its_value_and_max() -> None:
    html = progress_html(Progress(step=30, total=120, seen_at=1.0))
    assert '<progress value="30" max="120"' in html and "30/120 (25%)" in html
    assert "<progress aria-label" in progress_html(Progress(step=30, seen_at=1.0)), "no total: under way"
    assert progress_html(None) == ""
