"""What the docs say argus sets on a verl job is what specs.workloads.verl sets."""

from __future__ import annotations

import re
from pathlib import Path

from specs.kinds.models import Job
from specs.workloads import verl

DOCS = Path(__file__).resolve().parents[3] / "docs"


def test_migrating_claims_no_default_argus_does_not_set():
    row = next(line for line in (DOCS / "migrating.md").read_text().splitlines() if "`workload: ppo" in line
               and "v1.1" not in line and "| `workload` " in line)
    sft = Job(kind="Job", name="s", cluster="c", workload="sft", model="/m", data={"train": "/d"})
    set_by_argus = verl.overrides(sft, "team")
    assert not any(o.startswith("trainer.device=") for o in set_by_argus)
    for claimed in re.findall(r"`([a-z_.]+=[^`]+)`", row):
        key, _, value = claimed.partition("=")
        assert f"{key}={verl.hydra_value(value)}" in set_by_argus or claimed in set_by_argus, claimed
