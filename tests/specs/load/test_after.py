"""`after:` and `${job:NAME.FIELD}`: every pipeline problem located at file:line, with what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from specs.errors import SpecError
from specs.load import after
from specs.load.loader import load_workspace
from specs.workloads.submission import resolve, spec_hash
from tests.support.workspace import Workspace


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    ws = Workspace(tmp_path, "team", "http://127.0.0.1:1")
    ws.write("argus.yaml", "kind: Workspace\nname: team\n")
    ws.write("clusters/c.yaml", "kind: Cluster\nname: c\naddress: http://10.0.0.1:8265\nshared_root: /mnt/shared\n")
    return ws


def job(name: str, extra: str = "", entrypoint: str = "[echo, hi]") -> str:
    return f"kind: Job\nname: {name}\ncluster: c\nworkload: command\nentrypoint: {entrypoint}\n{extra}"


def messages(ws: Workspace) -> list[str]:
    with pytest.raises(SpecError) as caught:
        load_workspace(ws.root)
    return [str(d) for d in caught.value.diagnostics]


def test_a_pipeline_loads_and_plans_in_order(ws: Workspace) -> None:
    ws.write("jobs/a.yaml", job("eval", "after: {train: finished}\n",
                                "sh -c 'ls ${job:train.checkpoint_dir} ${job:train.submission_id}'"))
    ws.write("jobs/b.yaml", job("train", "after: [prepare]\nrerun_with_predecessors: true\n"))
    ws.write("jobs/c.yaml", job("prepare"))
    desired = load_workspace(ws.root)
    assert after.needs(desired.jobs["eval"]) == {"train": "finished"}
    assert after.needs(desired.jobs["train"]) == {"prepare": "succeeded"}
    assert after.in_order(desired.jobs) == ["prepare", "train", "eval"]
    assert after.references(desired.jobs["eval"].entrypoint) == [("train", "checkpoint_dir"),
                                                                 ("train", "submission_id")]


def test_after_and_rerun_stay_outside_the_spec_hash(ws: Workspace) -> None:
    ws.write("jobs/a.yaml", job("prepare"))
    ws.write("jobs/b.yaml", job("train"))
    plain = load_workspace(ws.root)
    ws.write("jobs/b.yaml", job("train", "after: [prepare]\nrerun_with_predecessors: true\n"))
    piped = load_workspace(ws.root)
    hashes = [spec_hash(resolve(d.workspace, d.clusters["c"], d.jobs["train"])) for d in (plain, piped)]
    assert hashes[0] == hashes[1]


def test_unknown_self_and_cycles_are_located_at_the_after_line(ws: Workspace) -> None:
    ws.write("jobs/a.yaml", job("a", "after: [b, ghost]\n"))
    ws.write("jobs/b.yaml", job("b", "after:\n  c: succeeded\n"))
    ws.write("jobs/c.yaml", job("c", "after: [a]\n"))
    ws.write("jobs/d.yaml", job("d", "after: [d]\n"))
    found = messages(ws)
    assert any(m.startswith("jobs/a.yaml:6") and "no Job named 'ghost'" in m for m in found), found
    assert any(m.startswith("jobs/d.yaml:6") and "cannot run after itself" in m for m in found), found
    cycles = [m for m in found if "cycle" in m]
    assert len(cycles) == 1 and cycles[0].startswith("jobs/a.yaml:6") and "a -> b -> c -> a" in cycles[0], found


def test_references_must_name_a_predecessor_and_a_known_field(ws: Workspace) -> None:
    ws.write("jobs/a.yaml", job("train"))
    ws.write("jobs/b.yaml", job("other"))
    ws.write("jobs/c.yaml", job("eval", "after: [train]\nenv:\n  A: ${job:other.checkpoint_dir}\n"
                                        "  B: ${job:train.log_dir}\n",
                                "[ls, '${job:Train}']"))
    found = messages(ws)
    assert any(m.startswith("jobs/c.yaml:8") and "not in this job's `after:`" in m for m in found), found
    assert any(m.startswith("jobs/c.yaml:9") and "unknown field 'log_dir'" in m for m in found), found
    assert any(m.startswith("jobs/c.yaml:5") and "not a reference argus knows" in m for m in found), found


def test_after_must_be_names_and_known_ends(ws: Workspace) -> None:
    ws.write("jobs/a.yaml", job("train"))
    ws.write("jobs/b.yaml", job("eval", "after: {train: maybe}\n"))
    found = messages(ws)
    assert any(m.startswith("jobs/b.yaml:6") for m in found), found


def test_a_checkpoint_directory_on_another_cluster_s_shared_root_is_refused(ws: Workspace) -> None:
    ws.write("clusters/d.yaml", "kind: Cluster\nname: d\naddress: http://10.0.0.2:8265\nshared_root: /mnt/other\n")
    ws.write("jobs/a.yaml", job("train").replace("cluster: c", "cluster: d"))
    ws.write("jobs/b.yaml", job("eval", "after: [train]\nenv:\n  A: ${job:train.checkpoint_dir}\n"
                                        "  B: ${job:train.submission_id}\n"))
    found = messages(ws)
    assert len(found) == 1 and found[0].startswith("jobs/b.yaml:8") and "may not see" in found[0], found


def test_stand_ins_keep_hydra_from_reading_a_reference_as_its_own():
    text = "+eval.ckpt=${job:train.checkpoint_dir}/step-${job:train.submission_id}"
    assert after.stand_ins(text) == "+eval.ckpt=/argus-stand-in/train/checkpoints/step-train-stand-in"
    assert after.safe("${shared_root}/outputs/x") and not after.safe("/x/$(id)") and not after.safe("${HOME}/x")


def test_a_thousand_jobs_each_after_all_earlier_ones_is_a_located_error_in_seconds(ws: Workspace) -> None:
    """Issue 37: such a workspace made `plan` run 98 s and die of a MemoryError; now each job past the bound
    is an error at its `after:` line, found in seconds."""
    import time

    for n in range(1000):
        earlier = "".join(f"  - j{k}\n" for k in range(n))
        ws.write(f"jobs/j{n}.yaml", job(f"j{n}", f"after:\n{earlier}" if earlier else ""))
    started = time.monotonic()
    found = messages(ws)
    assert time.monotonic() - started < 60  # generous for a loaded 2-core machine; it was a crash before
    located = [m for m in found if "at most 64" in m]
    assert len(located) == 1000 - 65 and any(m.startswith("jobs/j65.yaml:6") for m in located), found[:3]
