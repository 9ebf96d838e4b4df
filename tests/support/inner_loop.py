"""`make check`, the inner loop: every test that needs no Ray cluster, in about two minutes on 2 cores.

With ARGUS_TESTS_WITHOUT_RAY=1 a test is skipped, not run, when it needs a Ray cluster: when it asks for one of the
shared clusters' fixtures (before it starts), or when it starts one itself (state.ray.local starts every cluster the
tests run, so that is where the skip is raised). `make test` sets nothing and runs the whole suite."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from state.ray import local

VARIABLE = "ARGUS_TESTS_WITHOUT_RAY"
RAY_FIXTURES = frozenset({"ray_cluster", "gpu_cluster", "workspace"})
WHY = "needs a Ray cluster: `make test` runs it (make check skips it)"


def without_ray() -> bool:
    return os.environ.get(VARIABLE) == "1"


def examples(full: int) -> int:
    """How many examples a property test draws: a quarter (at least 50) in `make check`, all of them in `make test`.
    Hypothesis draws new ones at each run, so the inner loop's runs still cover the space between them."""
    return max(50, full // 4) if without_ray() else full


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not without_ray():
        return
    for item in items:
        if RAY_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.skip(reason=WHY))


@pytest.fixture(scope="session", autouse=True)
def _no_ray_started() -> Iterator[None]:
    """A test that starts a cluster of its own is skipped where it would start it."""
    if not without_ray():
        yield
        return
    started = local._ray_start

    def refused(*args: object, **kwargs: object) -> None:
        pytest.skip(WHY)

    local._ray_start = refused
    try:
        yield
    finally:
        local._ray_start = started
