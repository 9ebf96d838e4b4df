"""The editor's schema and `argus validate` side by side: where each finds a document wrong, as dotted fields
(tests/specs' schema agreement tests, one per family of kinds)."""

from __future__ import annotations

import json
from pathlib import Path

from jsonschema import Draft202012Validator

from specs.schema.schema import json_schema
from tests.support.workspace import make_workspace

SNAPSHOT = {"kind": "CodeSnapshot", "name": "case", "cluster": "local", "git": {"url": "/srv/verl.git", "ref": "v1"}}


def schema_validator() -> Draft202012Validator:
    schema = json_schema()
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def schema_fields(validator: Draft202012Validator, document: dict) -> list[str]:
    """Where the schema finds the document wrong: each error's path, or the property it says is missing."""
    found = []
    for error in _deepest(validator.iter_errors(document)):
        path = ".".join(str(p) for p in error.absolute_path)
        missing = error.message.split("'")[1] if error.validator in ("required", "additionalProperties") else ""
        found.append(".".join(p for p in (path, missing) if p))
    return found


def _deepest(errors) -> list:
    """An optional field's error is an anyOf's (the object, or null): its own errors are inside it."""
    found = []
    for error in errors:
        inner = [e for e in error.context or [] if e.validator != "type" or e.validator_value != "null"]
        found += _deepest(inner) if inner else [error]
    return found


def validate_fields(argus, tmp_path: Path, document: dict, secrets: tuple[str, ...] = ()) -> list[str]:
    """Where `argus validate --json` finds it wrong, in a workspace holding it beside a cluster and a snapshot."""
    ws = make_workspace(tmp_path / "ws", "agree", "http://127.0.0.1:9", secrets=secrets)
    ws.write("code.yaml", json.dumps({**SNAPSHOT, "name": "verl"}))
    ws.write("case.yaml", json.dumps(document))  # JSON is YAML
    result = argus("validate", ws.root, "--json")
    data = json.loads(result.out)
    assert (result.code == 0) == data.get("valid", False), result.out
    return [d["field"] for d in data.get("diagnostics", [])]


def assert_both_accept(validator: Draft202012Validator, argus, tmp_path: Path, document: dict,
                       secrets: tuple[str, ...] = ()) -> None:
    assert schema_fields(validator, document) == []
    assert validate_fields(argus, tmp_path, document, secrets) == []


def assert_both_refuse_at(validator: Draft202012Validator, argus, tmp_path: Path, document: dict, field: str,
                          secrets: tuple[str, ...] = ()) -> None:
    """Each refuses, and only at `field` (or inside it)."""
    by_schema = schema_fields(validator, document)
    by_validate = validate_fields(argus, tmp_path, document, secrets)
    assert by_schema and all(f.startswith(field) for f in by_schema), by_schema
    assert by_validate and all(f.startswith(field) for f in by_validate), by_validate
