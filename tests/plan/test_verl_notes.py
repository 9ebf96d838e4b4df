"""The plan's verl note says what of argus's verl knowledge was applied, as check_job applied it."""

from __future__ import annotations

from reconcile.plan.verl import with_verl_notes
from tests.support.checkpoints import desired, observed, ppo, profile, start


def note_of(**update) -> str:
    job = ppo()
    seen = observed(None, verl=profile(version="0.10.0").model_copy(update={"knowledge": None, **update}))
    [change] = with_verl_notes(desired(job), seen, [start(job)])
    assert change.verl is not None
    return change.verl.checked


def test_a_newer_verl_checked_with_the_newest_rules_is_not_said_to_be_composed_only():
    words = "outside argus's verl knowledge: composed and checked with its 0.9.x rules, as warnings"
    assert note_of(checked=words) == words
    assert "composed only" not in note_of()  # a profile that does not say: nothing claimed
