"""The JSON Schema of every kind, for editors (yaml-language-server) and tools.

Each field's description is its docstring in specs/kinds/models.py (or specs/kinds/inputs.py), read here from the source
when a schema is made. pydantic's use_attribute_docstrings would read them at every start-up of every command
instead, by parsing the module's source again for each class (~0.035 s of `argus plan`'s start-up).
"""

from __future__ import annotations

import ast
import inspect
import json
import re
from itertools import pairwise
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, TypeAdapter

from specs.kinds import inputs, models
from specs.kinds.inputs import Dataset, Model
from specs.kinds.models import Cluster, CodeSnapshot, Job, Quotas, Workspace
from specs.schema.schema_rules import add_rules

SCHEMA_BASE = "https://argus.dev/schema/"
SCHEMA_ID = SCHEMA_BASE + "argus.schema.json"
KINDS = ("Workspace", "Cluster", "CodeSnapshot", "Job", "Quotas", "Dataset", "Model")
MODULES = (models, inputs)
"""The modules whose classes' field docstrings describe the schema."""


def json_schema(kind: str | None = None) -> dict[str, Any]:
    """Any kind, told by its `kind` (one document: editors apply it to each document of a file), or one kind."""
    resource = Annotated[Workspace | Cluster | CodeSnapshot | Job | Quotas | Dataset | Model,
                         Field(discriminator="kind")]
    schema = TypeAdapter(resource).json_schema()
    _describe(schema.get("$defs", {}))
    add_rules(schema)
    head = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_BASE + schema_file(kind)}
    if kind is None:
        return {**head, "title": "argus resource (one YAML document)", **_by_kind(), "$defs": schema["$defs"]}
    definitions = schema["$defs"]
    return {**head, "title": f"argus {kind} (one YAML document)", "$ref": f"#/$defs/{kind}",
            "$defs": {name: definitions[name] for name in sorted(_reachable(definitions, kind))}}


def _reachable(definitions: dict[str, Any], start: str) -> set[str]:
    """The definitions `start` refers to, through any depth of `$ref`s: one kind's file holds only its own."""
    found, todo = set(), [start]
    while todo:
        name = todo.pop()
        if name not in found:
            found.add(name)
            todo += re.findall(r'"#/\$defs/([A-Za-z]+)"', json.dumps(definitions[name]))
    return found


def _by_kind() -> dict[str, Any]:
    """The kind's schema, chosen by `kind` with if/then rather than oneOf: a tool then reports the document's
    own errors ("'entrypoint' is a required property"), not that it matches none of four kinds."""
    return {"type": "object", "required": ["kind"], "properties": {"kind": {"enum": list(KINDS)}},
            "allOf": [{"if": {"properties": {"kind": {"const": kind}}, "required": ["kind"]},
                       "then": {"$ref": f"#/$defs/{kind}"}} for kind in KINDS]}


def schema_file(kind: str | None = None) -> str:
    """Its file under schema/: argus.schema.json for any kind, job.schema.json for Job."""
    return f"{(kind or 'argus').lower()}.schema.json"


def schema_text(kind: str | None = None) -> str:
    return json.dumps(json_schema(kind), indent=2, sort_keys=True) + "\n"


def _describe(definitions: dict[str, Any]) -> None:
    """Each model's fields described by their docstrings (its own and its bases'), unless described already:
    where pydantic puts a field's description, at the top of the property's schema."""
    docstrings = field_docstrings()
    for name, definition in definitions.items():
        model = next((getattr(m, name) for m in MODULES if isinstance(getattr(m, name, None), type)), None)
        if model is None:
            continue
        described: dict[str, str] = {}
        for base in reversed(model.__mro__):
            described |= docstrings.get(base.__name__, {}) if base.__module__ in _MODULE_NAMES else {}
        properties = definition.get("properties", {})
        for field, docstring in described.items():
            if field in properties:
                properties[field].setdefault("description", docstring)


_MODULE_NAMES = {module.__name__ for module in MODULES}


def field_docstrings() -> dict[str, dict[str, str]]:
    """Class of specs/kinds/models.py or specs/kinds/inputs.py -> field -> the string right after the field's annotated
    assignment, cleaned as pydantic cleans a docstring (no class name is defined in both)."""
    return {name: fields for module in MODULES for name, fields in _docstrings_of(module.__file__ or "").items()}


def _docstrings_of(file: str) -> dict[str, dict[str, str]]:
    tree = ast.parse(Path(file).read_text(encoding="utf-8"))
    return {node.name: {field.target.id: inspect.cleandoc(doc.value.value)
                        for field, doc in pairwise(node.body)
                        if isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name)
                        and isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant)
                        and isinstance(doc.value.value, str)}
            for node in tree.body if isinstance(node, ast.ClassDef)}
