"""The one Diagnostic type: how it prints, how plan JSON carries it, how the loader's are ordered."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from reconcile.model import Plan
from specs.desired import Source
from specs.diagnostics import Diagnostic, Where
from specs.errors import SpecError


def test_it_prints_as_file_line_field_message_and_hint():
    found = Diagnostic.in_file("jobs/a.yaml", 5, "entrypoint", "must be a list", hint="write it as [a, b]")
    assert str(found) == "jobs/a.yaml:5: entrypoint: must be a list; write it as [a, b]"
    assert str(Diagnostic.in_file("a.yaml", 1, "", "invalid YAML")) == "a.yaml:1: invalid YAML"
    assert str(Diagnostic(severity="warning", message="unplaced")) == "unplaced"


def test_a_file_name_cannot_forge_a_line_of_output_but_json_keeps_the_name():
    found = Diagnostic.in_file("a\nError: b.yaml", 2, "name", "duplicate")
    assert str(found) == "a\\nError: b.yaml:2: name: duplicate"
    assert found.model_dump(mode="json")["where"] == "a\nError: b.yaml:2"


def test_plan_json_keeps_its_shape_the_field_is_never_dumped_and_a_hint_only_when_given():
    source = Source("j.yaml", 1, {"trainer": 4})
    plain = Diagnostic(severity="error", address="job.a", field="trainer", message="m").located(source)
    assert plain.model_dump(mode="json") == {"severity": "error", "address": "job.a", "message": "m",
                                             "where": "j.yaml:4"}
    hinted = plain.model_copy(update={"hint": "do this"})
    assert hinted.model_dump(mode="json")["hint"] == "do this"
    saved = Plan(workspace="w", changes=(), diagnostics=(plain, hinted))
    again = Plan.model_validate(json.loads(saved.model_dump_json()))
    assert [d.where for d in again.diagnostics] == [Where("j.yaml", 4)] * 2 and again.diagnostics[1].hint == "do this"


@pytest.mark.parametrize("where", ["j.yaml", "j.yaml:", "j.yaml:x", "j.yaml:²", 4])
def test_a_where_that_is_not_file_colon_line_is_refused(where):
    with pytest.raises(ValidationError):
        Diagnostic(severity="error", message="m", where=where)


def test_the_loader_error_lists_by_file_then_line_as_numbers():
    found = [Diagnostic.in_file("b.yaml", 1, "", "x"), Diagnostic.in_file("a.yaml", 10, "", "y"),
             Diagnostic.in_file("a.yaml", 9, "name", "z")]
    error = SpecError(found)
    assert [str(d) for d in error.diagnostics] == ["a.yaml:9: name: z", "a.yaml:10: y", "b.yaml:1: x"]
    assert str(error) == "The desired state has 3 problems:\n  a.yaml:9: name: z\n  a.yaml:10: y\n  b.yaml:1: x"
