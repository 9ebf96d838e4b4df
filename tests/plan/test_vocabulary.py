"""One vocabulary: Action members carry their rendering and order; addresses are made and parsed in one place."""

from __future__ import annotations

import json

import pytest

from reconcile.model import Action
from specs.address import WORKSPACE, Address, Kind
from specs.desired import address_of


def test_actions_carry_their_symbol_order_and_colour():
    assert [(a.value, a.symbol, a.colour) for a in Action] == [
        ("create", "+", "green"), ("update", "~", "yellow"), ("submit", "+", "green"), ("stop", "-", "red"),
        ("replace", "-/+", "yellow"),
        ("retry", "+", "green"), ("preempt", "-", "red"), ("deadline", "-", "red"), ("idle", "-", "red"),
        ("queue", "~", "cyan"),
        ("delete", "-", "red"),
        ("drift", "!", "yellow"), ("no-op", " ", None), ("wait", "..", "blue")]
    assert sorted(Action, key=lambda a: a.order) == [Action.CREATE, Action.UPDATE, Action.STOP, Action.PREEMPT,
                                                     Action.DEADLINE, Action.IDLE,
                                                     Action.REPLACE, Action.QUEUE, Action.SUBMIT, Action.RETRY,
                                                     Action.DELETE, Action.DRIFT, Action.NOOP, Action.WAIT]
    assert Action("submit") is Action.SUBMIT and json.dumps(Action.RETRY) == '"retry"'


def test_addresses_are_made_and_taken_apart_in_one_place():
    assert (Address.job("a"), Address.code("b"), Address.dirs("c"), Address.cluster("d"), WORKSPACE) == (
        "job.a", "code.b", "dirs.c", "cluster.d", "workspace")
    assert (Address.job("a").kind, Address.job("a").name, WORKSPACE.kind, WORKSPACE.name) == (
        Kind.JOB, "a", Kind.WORKSPACE, "")
    for kind in ("Job", "CodeSnapshot", "Cluster", "Workspace"):
        assert Address.of_spec(kind, "n") == address_of(kind, "n")
    for text in ("job.", "job", "jobs.a", "job.A", "job.a.b", "workspace.x", "", " job.a", None, 3):
        assert Address.parse(text) is None
    with pytest.raises(ValueError):
        Address("job.Not A Name")
