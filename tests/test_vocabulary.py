"""One vocabulary: Action members carry their rendering and order; addresses are made and parsed in one place."""

from __future__ import annotations

import json

from reconcile.model import Action


def test_actions_carry_their_symbol_order_and_colour():
    assert [(a.value, a.symbol, a.colour) for a in Action] == [
        ("create", "+", "green"), ("submit", "+", "green"), ("stop", "-", "red"), ("replace", "-/+", "yellow"),
        ("retry", "+", "green"), ("delete", "-", "red"), ("no-op", " ", None)]
    assert sorted(Action, key=lambda a: a.order) == [Action.CREATE, Action.STOP, Action.REPLACE, Action.SUBMIT,
                                                     Action.RETRY, Action.DELETE, Action.NOOP]
    assert Action("submit") is Action.SUBMIT and json.dumps(Action.RETRY) == '"retry"'
