"""Property: whatever the YAML, the loader answers with located diagnostics, never a traceback."""

from __future__ import annotations

import io
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from specs.errors import ArgusError, SpecError
from specs.load.loader import load_workspace
from tests.support.inner_loop import examples

KEYS = st.sampled_from(["kind", "name", "cluster", "workload", "entrypoint", "env", "git", "path", "code", "model",
                        "data", "trainer", "overrides", "nodes", "address", "shared_root", "run", "state", "x"])
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True),
                    st.text(max_size=12), st.sampled_from(["Job", "Cluster", "CodeSnapshot", "Workspace", "h20",
                                                           "${env:X}", "../../etc", "/abs", "command", "ppo"]))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                      st.dictionaries(KEYS, inner, max_size=4)), max_leaves=12)
DOCUMENTS = st.lists(st.dictionaries(KEYS, VALUES, max_size=8), min_size=1, max_size=3)


def check(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "argus.yaml").write_text("kind: Workspace\nname: fuzz\n")
        (root / "fuzz.yaml").write_text(text)
        try:
            load_workspace(root)
        except SpecError as err:
            places = [d.where for d in err.diagnostics]
            assert places and all(w and w.line >= 1 and w.file in ("fuzz.yaml", "argus.yaml") for w in places)
            assert all(w.line <= max(1, text.count("\n") + 1) for w in places if w and w.file == "fuzz.yaml")
        except ArgusError:
            pass


@settings(max_examples=examples(600), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(DOCUMENTS)
def test_structured_garbage_gets_located_diagnostics(documents):
    buffer = io.StringIO()
    YAML().dump_all(documents, buffer)
    check(buffer.getvalue())


@settings(max_examples=examples(600), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from([*"kind: Job\n-[]{}&*!|>'\"#%@`,?\t ${}", "name: a", "---", "\n  ", "<<: ",
                                  "&a ", "*a", "[[[[[[[[[[", "!!int ", "2024-13-45"]),
                max_size=60))
def test_textual_garbage_gets_located_diagnostics(pieces):
    check("".join(pieces))
