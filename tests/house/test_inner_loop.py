"""`make check` skips exactly the tests that need a Ray cluster (tests/support/inner_loop.py): those asking for a
shared cluster's fixture before they start, and any that starts a cluster itself where it would start it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from state.ray import local
from tests.support import inner_loop


def items(*fixtures: tuple[str, ...]) -> list[SimpleNamespace]:
    made = []
    for names in fixtures:
        item = SimpleNamespace(fixturenames=list(names), markers=[])
        item.add_marker = item.markers.append
        made.append(item)
    return made


def test_tests_asking_for_a_cluster_are_skipped_only_in_the_inner_loop(monkeypatch: pytest.MonkeyPatch):
    found = items(("tmp_path", "ray_cluster"), ("tmp_path",), ("workspace", "argus"), ("gpu_cluster",))
    monkeypatch.delenv(inner_loop.VARIABLE, raising=False)  # `make check` itself sets it
    inner_loop.pytest_collection_modifyitems(None, found)  # type: ignore[arg-type]
    assert [i.markers for i in found] == [[], [], [], []]
    monkeypatch.setenv(inner_loop.VARIABLE, "1")
    inner_loop.pytest_collection_modifyitems(None, found)  # type: ignore[arg-type]
    assert [bool(i.markers) for i in found] == [True, False, True, True]
    assert found[0].markers[0].kwargs["reason"] == inner_loop.WHY


def test_a_test_starting_a_cluster_itself_is_skipped_where_it_starts_it(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(inner_loop.VARIABLE, "1")
    started = local._ray_start
    guard = inner_loop._no_ray_started.__wrapped__()  # the fixture's generator, run by hand
    next(guard)
    try:
        with pytest.raises(pytest.skip.Exception, match="needs a Ray cluster"):
            local._ray_start(None, [], "head")  # type: ignore[arg-type]
    finally:
        next(guard, None)
    assert local._ray_start is started


def test_the_inner_loop_draws_a_quarter_of_a_property_tests_examples(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(inner_loop.VARIABLE, raising=False)
    assert (inner_loop.examples(600), inner_loop.examples(100)) == (600, 100)
    monkeypatch.setenv(inner_loop.VARIABLE, "1")
    assert (inner_loop.examples(600), inner_loop.examples(100)) == (150, 50)
