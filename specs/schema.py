"""The JSON Schema of every kind, for editors (yaml-language-server) and tools."""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import Field, TypeAdapter

from specs.models import Cluster, CodeSnapshot, Job, Workspace

SCHEMA_ID = "https://argus.dev/schema/argus.schema.json"


def json_schema() -> dict[str, Any]:
    resource = Annotated[Workspace | Cluster | CodeSnapshot | Job, Field(discriminator="kind")]
    schema = TypeAdapter(resource).json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID,
            "title": "argus resource (one YAML document)", **schema}


def schema_text() -> str:
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"
